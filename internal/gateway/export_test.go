package gateway

import "time"

// SetLevelTimeout sets how long an upstream may take to answer
// logging/setLevel, until the test ends.
func SetLevelTimeout(t interface{ Cleanup(func()) }, d time.Duration) {
	old := setLevelTimeout
	setLevelTimeout = d
	t.Cleanup(func() { setLevelTimeout = old })
}

// SetStopWait sets how long the configuration's command upstreams have to
// exit once their stdin is closed, before they are signalled.
func SetStopWait(c *Config, d time.Duration) { c.stopWait = d }

// Dropped returns how many log messages and requests of upstreams went to
// no client.
func (g *Gateway) Dropped() uint64 { return g.relay.pass.dropped.Load() }
