package server

import (
	"fmt"
	"testing"
	"time"
)

// A full log refuses new keys rather than forget one that still counts:
// made-up keys never reset the count of the key under attack. Keys whose
// times have all left the window make room again.
func TestSlidingLogFullKeepsCounts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newSlidingLog(3, window{5, time.Minute}, window{20, time.Hour})
	for range 5 {
		if wait, full := l.check("victim", now); wait != 0 || full {
			t.Fatalf("victim: wait %s, full %v", wait, full)
		}
		l.add("victim", now)
	}
	admitted := 0
	for i := range 100 {
		now = now.Add(100 * time.Millisecond)
		key := fmt.Sprintf("made-up-%d", i)
		if wait, full := l.check(key, now); !full && wait == 0 {
			l.add(key, now)
			admitted++
		}
	}
	if admitted != 2 {
		t.Errorf("%d new keys admitted into a log of 3 holding one, want 2", admitted)
	}
	if wait, full := l.check("victim", now); full || wait == 0 {
		t.Errorf("victim after the flood: wait %s, full %v; want still limited", wait, full)
	}
	if len(l.keys) != 3 {
		t.Errorf("%d keys, want 3", len(l.keys))
	}
	now = now.Add(time.Hour)
	if wait, full := l.check("newcomer", now); wait != 0 || full {
		t.Errorf("an hour later: wait %s, full %v; want room", wait, full)
	}
}
