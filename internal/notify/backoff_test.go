package notify

import (
	"testing"
	"time"
)

// TestBackoff: the wait doubles from BaseDelay up to MaxDelay, with at most
// a tenth more, so that ten attempts span about an hour.
func TestBackoff(t *testing.T) {
	w := NewWorker(nil, &Delivery{}, nil, nil, WorkerConfig{})
	want := []time.Duration{15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute,
		8 * time.Minute, 16 * time.Minute, 20 * time.Minute, 20 * time.Minute, 20 * time.Minute}
	var total time.Duration
	for i, base := range want {
		got := w.backoff(i + 1)
		if got < base || got > base+base/10 {
			t.Errorf("backoff(%d) = %v, want %v to %v", i+1, got, base, base+base/10)
		}
		if i < len(want)-1 {
			total += got
		}
	}
	// Nine waits between ten attempts.
	if total < 70*time.Minute || total > 80*time.Minute {
		t.Errorf("ten attempts span %v, want about an hour", total)
	}
}

func TestWorkerConfigDefaults(t *testing.T) {
	c := WorkerConfig{SendTimeout: 5 * time.Minute, Lease: time.Minute}
	c.setDefaults()
	if c.Lease <= c.SendTimeout || c.MaxAttempts != 10 || c.Batch != 10 || c.Interval != time.Second {
		t.Errorf("defaults = %+v; the lease must outlast an attempt", c)
	}
}

// TestTemplatesParse fails on a broken template, which the binary parses
// only on first use.
func TestTemplatesParse(t *testing.T) {
	htmlMail()
	textMail()
	ntfyBody()
}
