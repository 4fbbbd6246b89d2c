package agent

import (
	"strconv"
	"testing"
	"time"
)

// TestHookStart: a handed-over hook keeps the start it began with, never
// one in the future or from long ago.
func TestHookStart(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvHookStart {
				return v
			}
			return ""
		}
	}
	ns := func(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }
	tests := []struct {
		name, value string
		want        time.Time
	}{
		{"unset", "", now},
		{"garbage", "soon", now},
		{"earlier", ns(now.Add(-3 * time.Second)), now.Add(-3 * time.Second)},
		{"now", ns(now), now},
		{"in the future", ns(now.Add(time.Second)), now},
		{"an hour ago", ns(now.Add(-time.Hour)), now},
	}
	for _, tt := range tests {
		if got := HookStart(env(tt.value), now); !got.Equal(tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
