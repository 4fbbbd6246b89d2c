package server

import (
	"testing"
	"time"
)

// TestDefaultBodyLimits: a server configured without limits reads uploads
// under ADR 0008's (no 10 s pause, 16 KB/s after 10 s, 90 s in all), and
// one configured with limits under those.
func TestDefaultBodyLimits(t *testing.T) {
	t.Parallel()
	want := BodyLimits{Total: 90 * time.Second, Stall: 10 * time.Second, Grace: 10 * time.Second, MinRate: 16 << 10}
	if DefaultBodyLimits != want {
		t.Fatalf("DefaultBodyLimits %+v, want %+v", DefaultBodyLimits, want)
	}
	if got := (&Server{}).bodyLimits(); got != want {
		t.Fatalf("no limits configured: %+v, want %+v", got, want)
	}
	set := BodyLimits{Total: time.Second, Stall: time.Millisecond, Grace: time.Millisecond, MinRate: 1}
	if got := (&Server{cfg: Config{UploadLimits: set}}).bodyLimits(); got != set {
		t.Fatalf("limits configured: %+v, want %+v", got, set)
	}
}
