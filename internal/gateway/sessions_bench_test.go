package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/gctune"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"
)

// BenchmarkSessionFlood measures what one agent key that sends only
// initialize, a thousand a second, does to another account's read call and
// to the server's memory: the real server on loopback, the read call a
// read-tier tool call in a session of protocol 2025-11-25 (whose events
// go through the same event store as the flood's), its latency measured
// quiet and then under the flood, in one run.
//
//	go test -run '^$' -bench BenchmarkSessionFlood -benchtime 1x ./internal/gateway
//
// rate=600 is the default configuration, under which the victim reads
// five times a second (its own calls count against its rate too); rate=0
// turns the per-key rate off, so that only the session limits bound the
// flood, and the victim reads 40 times a second. The quiet phase lasts
// quietTime. The flood sends floodRate requests a second, about the rate
// at which one client opened sessions on a server of the same size, and
// stops after floodCount requests or floodTime, whichever comes first
// (SESSION_FLOOD_RATE, SESSION_FLOOD_COUNT and SESSION_FLOOD_SECONDS
// change them; a rate of 0 sends as fast as floodWorkers connections
// can). The collector keeps serve's floor, as in the binary.
func BenchmarkSessionFlood(b *testing.B) {
	defer gctune.Default(gctune.ServeFloor)()
	for _, v := range []struct {
		rate int
		pace time.Duration
	}{{gateway.DefaultRate, 200 * time.Millisecond}, {0, 25 * time.Millisecond}} {
		b.Run(fmt.Sprintf("rate=%d", v.rate), func(b *testing.B) {
			for b.Loop() {
				sessionFlood(b, v.rate, v.pace)
			}
		})
	}
}

const (
	floodWorkers = 4
	floodRate    = 1000
	floodCount   = 20000
	floodTime    = 20 * time.Second
	quietTime    = 8 * time.Second
)

func sessionFlood(b *testing.B, perMinute int, pace time.Duration) {
	count, limit, perSecond := floodCount, floodTime, floodRate
	if n, err := strconv.Atoi(os.Getenv("SESSION_FLOOD_RATE")); err == nil {
		perSecond = n
	}
	if n, err := strconv.Atoi(os.Getenv("SESSION_FLOOD_COUNT")); err == nil {
		count = n
	}
	if n, err := strconv.Atoi(os.Getenv("SESSION_FLOOD_SECONDS")); err == nil {
		limit = time.Duration(n) * time.Second
	}
	h := newHarness(b, func(c *gateway.Config) { c.Rate = perMinute })
	victim := h.connect(clientOpts{key: "outsider", version: "2025-11-25"})
	read := func() time.Duration {
		start := time.Now()
		res, err := victim.CallTool(b.Context(), &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": "bench"}})
		if err != nil || res.IsError {
			b.Fatalf("read call: %v %v", err, res)
		}
		return time.Since(start)
	}
	for range 5 {
		read()
	}
	heap0, rss0 := memNow()
	tick := time.NewTicker(pace)
	defer tick.Stop()
	var quiet []time.Duration
	for end := time.Now().Add(quietTime); time.Now().Before(end); <-tick.C {
		quiet = append(quiet, read())
	}

	f := startFlood(h, count, limit, perSecond)
	var loaded []time.Duration
	for ; !f.finished(); <-tick.C {
		loaded = append(loaded, read())
	}
	f.wait()
	sessions := 0
	for range h.gw.Server().Sessions() {
		sessions++
	}
	heap1, rss1 := memNow()
	after := read()

	q50, q90 := quantile(quiet, 0.5), quantile(quiet, 0.9)
	l50, l90 := quantile(loaded, 0.5), quantile(loaded, 0.9)
	b.ReportMetric(ms(q50), "quiet-p50-ms")
	b.ReportMetric(ms(l50), "flood-p50-ms")
	b.ReportMetric(ms(l50)/ms(q50), "p50-ratio")
	b.ReportMetric(ms(q90), "quiet-p90-ms")
	b.ReportMetric(ms(l90), "flood-p90-ms")
	b.ReportMetric(float64(sessions), "sessions")
	b.ReportMetric(float64(heap1-heap0)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(rss1-rss0)/(1<<20), "rss-MiB")
	b.Logf("flood of %d initialize in %v from 1 key, %d workers, at most %d/s: %s; %d sessions live after; "+
		"read call quiet p50 %.2f p90 %.2f ms (%d calls), under the flood p50 %.2f p90 %.2f max %.2f ms (%d calls), after %.2f ms; "+
		"live heap and stacks %+.1f MiB, RSS %+.1f MiB",
		f.sent.Load(), f.took, floodWorkers, perSecond, f.statuses(), sessions,
		ms(q50), ms(q90), len(quiet), ms(l50), ms(l90), ms(slices.Max(loaded)), len(loaded), ms(after),
		float64(heap1-heap0)/(1<<20), float64(rss1-rss0)/(1<<20))
	// Not part of the measure: the next run starts from the same heap.
	for ss := range h.gw.Server().Sessions() {
		ss.Close()
	}
}

// flood sends initialize from the key agent on floodWorkers connections,
// reading every answer to its end.
type flood struct {
	sent   atomic.Int64
	done   chan struct{}
	wg     sync.WaitGroup
	took   time.Duration
	mu     sync.Mutex
	status map[int]int
}

func startFlood(h *harness, count int, limit time.Duration, perSecond int) *flood {
	f := &flood{done: make(chan struct{}), status: map[int]int{}}
	pace := rate.NewLimiter(rate.Inf, 1)
	if perSecond > 0 {
		pace = rate.NewLimiter(rate.Limit(perSecond), 1)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: floodWorkers}
	client := &http.Client{Transport: tr}
	body := []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`)
	// Not a wait: the deadline bounds how long the flood sends.
	start, deadline := time.Now(), time.Now().Add(limit)
	for range floodWorkers {
		f.wg.Go(func() {
			for pace.Wait(context.Background()) == nil && time.Now().Before(deadline) && f.sent.Add(1) <= int64(count) {
				req, _ := http.NewRequest("POST", h.base+"/mcp", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+h.keys["agent"])
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := client.Do(req)
				code := 0
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				f.mu.Lock()
				f.status[code]++
				f.mu.Unlock()
			}
		})
	}
	go func() {
		f.wg.Wait()
		f.took = time.Since(start)
		if n := f.sent.Load(); n > int64(count) {
			f.sent.Store(int64(count))
		}
		tr.CloseIdleConnections()
		close(f.done)
	}()
	return f
}

func (f *flood) finished() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

func (f *flood) wait() { <-f.done }

// statuses are the flood's answers by HTTP status, 0 for none.
func (f *flood) statuses() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for code, n := range f.status {
		out = append(out, fmt.Sprintf("%d × %d", n, code))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// memNow is the live heap (what the last of two collections marked; the
// second empties what sync.Pools kept through the first) and the stacks
// in use, and the process's RSS.
func memNow() (heap, rss int64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	if data, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(data)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			rss = pages * int64(os.Getpagesize())
		}
	}
	return int64(live[0].Value.Uint64() + m.StackInuse), rss
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
