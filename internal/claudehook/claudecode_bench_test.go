package claudehook

import (
	"bytes"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"
)

// BenchmarkClaudeCodeHook measures a tool call as the real Claude Code
// sees it, with countersign's hook installed as a command hook and as the
// HTTP hook, for a harmless line (ls: the hook answers nothing, Claude
// Code runs it) and a line the policy denies at once (rm -rf /). One
// Claude Code process makes b.N calls in one turn each; the scripted model
// times each call from the moment it sends the tool call to the moment
// the result comes back (the hook, Claude Code's own work and, for ls,
// running it), and Claude Code's debug log gives the hook's own time.
// Both are medians, in ms.
//
//	go test -run '^$' -bench BenchmarkClaudeCodeHook -benchtime 40x ./internal/claudehook/
func BenchmarkClaudeCodeHook(b *testing.B) {
	for _, line := range []struct{ name, command string }{{"harmless", "ls"}, {"denied", "rm -rf /"}} {
		for _, kind := range hookKinds {
			b.Run(line.name+"/"+kind.name, func(b *testing.B) {
				benchClaudeCode(b, kind.http, line.command)
			})
		}
	}
}

// hookTime is Claude Code's debug line for a command hook that finished.
var hookTime = regexp.MustCompile(`Hooks: PreToolUse:Bash .* \((\d+)ms\)`)

// hookTimes reads the time of each hook from Claude Code's debug log: a
// command hook's own figure, or for an HTTP hook the time from its
// request to its response (the lines' timestamps, in ms).
func hookTimes(debug []byte) []time.Duration {
	var list []time.Duration
	var posted time.Time
	for _, line := range bytes.Split(debug, []byte("\n")) {
		if m := hookTime.FindSubmatch(line); m != nil {
			n, _ := strconv.Atoi(string(m[1]))
			list = append(list, time.Duration(n)*time.Millisecond)
			continue
		}
		ts, _, ok := bytes.Cut(line, []byte(" "))
		at, err := time.Parse(time.RFC3339Nano, string(ts))
		if !ok || err != nil {
			continue
		}
		switch {
		case bytes.Contains(line, []byte("Hooks: HTTP hook POST to")):
			posted = at
		case bytes.Contains(line, []byte("Hooks: HTTP hook response status")) && !posted.IsZero():
			list = append(list, at.Sub(posted))
			posted = time.Time{}
		}
	}
	return list
}

func benchClaudeCode(b *testing.B, http bool, command string) {
	r := newClaudeRig(b, rigOptions{http: http})
	script := make([]toolUse, b.N)
	for i := range script {
		script[i] = bash(command)
	}
	b.ResetTimer()
	_, calls, debug := r.runTimed(nil, script...)
	b.StopTimer()
	if len(calls) != b.N-1 && len(calls) != b.N {
		b.Fatalf("%d calls timed of %d", len(calls), b.N)
	}
	b.ReportMetric(median(calls), "ms/call")
	if hooks := hookTimes(debug); len(hooks) > 0 {
		b.ReportMetric(median(hooks), "hook-ms/call")
	}
	b.ReportMetric(0, "ns/op")
}

// median is the median in ms.
func median(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	return float64(d[len(d)/2]) / float64(time.Millisecond)
}
