package gateway

import "time"

// SetLevelTimeout sets how long an upstream may take to answer
// logging/setLevel, until the test ends.
func SetLevelTimeout(t interface{ Cleanup(func()) }, d time.Duration) {
	old := setLevelTimeout
	setLevelTimeout = d
	t.Cleanup(func() { setLevelTimeout = old })
}
