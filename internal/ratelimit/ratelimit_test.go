package ratelimit_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign/internal/ratelimit"
)

func TestKeyed(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	l := ratelimit.New(60) // one a second, a burst of 10
	for i := range 10 {
		if ok, _ := l.Allow("a", now); !ok {
			t.Fatalf("call %d of the burst refused", i+1)
		}
	}
	ok, wait := l.Allow("a", now)
	if ok || wait != time.Second {
		t.Fatalf("the 11th call: %v, wait %v; want refused, 1s", ok, wait)
	}
	if blocked, wait := l.Blocked("a", now); !blocked || wait != time.Second {
		t.Errorf("Blocked = %v, %v", blocked, wait)
	}
	// A refused call took nothing: a second later exactly one more fits.
	if ok, _ := l.Allow("a", now.Add(time.Second)); !ok {
		t.Error("refused a second later")
	}
	if ok, _ := l.Allow("a", now.Add(time.Second)); ok {
		t.Error("two allowed after one second")
	}
	// Keys do not share a bucket.
	if ok, _ := l.Allow("b", now); !ok {
		t.Error("another key refused")
	}
	if blocked, _ := l.Blocked("c", now); blocked {
		t.Error("an unseen key is blocked")
	}
	// A quiet key is forgotten and starts with a full burst.
	later := now.Add(11 * time.Minute)
	for i := range 10 {
		if ok, _ := l.Allow("a", later); !ok {
			t.Fatalf("call %d after a quiet spell refused", i+1)
		}
	}
	if ok, _ := ratelimit.New(0).Allow("a", now); !ok {
		t.Error("the zero rate refused a call")
	}
	if ratelimit.New(0).PerMinute() != 0 || l.PerMinute() != 60 {
		t.Error("PerMinute")
	}
}
