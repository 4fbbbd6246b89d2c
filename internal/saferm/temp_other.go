//go:build !linux

package saferm

import "time"

// birth is unknown off Linux: no directory counts as the line's own.
func birth(string) (time.Time, int, bool) { return time.Time{}, 0, false }

// ParentStart is unknown off Linux.
func ParentStart() time.Time { return time.Time{} }
