package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.9, 90 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		if got := percentile(d, c.q); got != c.want {
			t.Errorf("percentile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := percentile([]time.Duration{7}, 0.99); got != 7 {
		t.Errorf("one sample: %v", got)
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("no sample: %v", got)
	}
}

func TestParseGauge(t *testing.T) {
	b := []byte("# HELP countersign_waiters x\n# TYPE countersign_waiters gauge\ncountersign_waiters_other 3\ncountersign_waiters 100\n")
	n, err := parseGauge(b, "countersign_waiters")
	if err != nil || n != 100 {
		t.Fatalf("parseGauge = %d, %v", n, err)
	}
	if _, err := parseGauge([]byte("x 1\n"), "countersign_waiters"); err == nil {
		t.Fatal("a missing metric parsed")
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{2000: "2000", 2345.67: "2345.7", 0.8123: "0.812", 12.5: "12.500"} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", v, got, want)
		}
	}
}
