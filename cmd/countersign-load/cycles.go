package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/client"
)

// failer keeps the first error of many goroutines and cancels them all.
type failer struct {
	once   sync.Once
	err    error
	cancel context.CancelFunc
}

func (f *failer) fail(err error) {
	f.once.Do(func() {
		f.err = err
		f.cancel()
	})
}

// job is one request handed from its agent to a decider.
type job struct {
	id       string
	approver *client.Client // the replica the decision is made on
	wrote    chan struct{}  // closed when the agent's long poll has been written to its connection
	decided  chan decided   // the decider's outcome
}

type decided struct {
	sent, answered time.Time
	err            error
}

// runCycles runs the cycles scenario: every agent loops create → long poll
// → (a decider approves) → wake → consume, for the warm-up and then the
// measured duration.
func runCycles(ctx context.Context, o *options, srv *server, out *printer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := &failer{cancel: cancel}

	// Agents and deciders each have their own pool of kept-alive
	// connections: a long poll holds its connection, so agents need up to
	// two each (the poll and the next create or consume).
	agents := clientsOf(srv, srv.agentKey, newTransport(2*o.agents+16))
	approvers := clientsOf(srv, srv.token, newTransport(o.deciders+16))

	start := time.Now()
	measureFrom := start.Add(o.warmup)
	measureTo := measureFrom.Add(o.duration)
	inWindow := func(t time.Time) bool { return !t.Before(measureFrom) && t.Before(measureTo) }

	var (
		cycles                     atomic.Int64
		wokeFirst                  atomic.Int64
		wake, sentToWake, cycleLat samples
		createLat, decideLat       samples
		consumeLat                 samples
	)

	jobs := make(chan *job)
	var dwg sync.WaitGroup
	for range o.deciders {
		dwg.Add(1)
		go func() {
			defer dwg.Done()
			for j := range jobs {
				select {
				case <-j.wrote:
				case <-ctx.Done():
					j.decided <- decided{err: ctx.Err()}
					continue
				}
				if o.settle > 0 {
					time.Sleep(o.settle)
				}
				sent := time.Now()
				_, err := approve(ctx, j.approver, j.id)
				j.decided <- decided{sent: sent, answered: time.Now(), err: err}
			}
		}()
	}

	var awg sync.WaitGroup
	for a := range o.agents {
		awg.Add(1)
		go func() {
			defer awg.Done()
			agent, approver := agents[a%len(agents)], approvers[(a+1)%len(approvers)]
			for iter := 0; ctx.Err() == nil && time.Now().Before(measureTo); iter++ {
				args, _ := json.Marshal(map[string]int{"agent": a, "iteration": iter})
				t0 := time.Now()
				r, created, err := create(ctx, agent, client.CreateInput{Kind: "generic", Action: "load.cycle", Arguments: args})
				if err != nil {
					f.fail(fmt.Errorf("agent %d: create: %w", a, err))
					return
				}
				t1 := time.Now()
				if !created || r.Status != "pending" {
					f.fail(fmt.Errorf("agent %d: create returned an existing or %s request %s", a, r.Status, r.ID))
					return
				}

				j := &job{id: r.ID, approver: approver, wrote: make(chan struct{}), decided: make(chan decided, 1)}
				var once sync.Once
				markWritten := func() { once.Do(func() { close(j.wrote) }) }
				tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
					WroteRequest: func(httptrace.WroteRequestInfo) { markWritten() },
				})
				select {
				case jobs <- j:
				case <-ctx.Done():
					return
				}
				w, err := agent.Wait(tctx, r.ID, 30*time.Second)
				woke := time.Now()
				markWritten() // never leave the decider waiting
				d := <-j.decided
				if err != nil {
					f.fail(fmt.Errorf("agent %d: long poll: %w", a, err))
					return
				}
				if d.err != nil {
					f.fail(fmt.Errorf("agent %d: decision: %w", a, d.err))
					return
				}
				if w.Status != "approved" {
					f.fail(fmt.Errorf("agent %d: the long poll of %s answered %q, not approved", a, r.ID, w.Status))
					return
				}

				t2 := time.Now()
				c, err := consume(ctx, agent, r.ID)
				if err != nil {
					f.fail(fmt.Errorf("agent %d: consume: %w", a, err))
					return
				}
				if c.Status != "consumed" {
					f.fail(fmt.Errorf("agent %d: consume answered %q", a, c.Status))
					return
				}
				t3 := time.Now()
				if !inWindow(t3) {
					continue
				}
				cycles.Add(1)
				lat := woke.Sub(d.answered)
				if lat < 0 {
					// The waiter's answer came in before the decider's.
					wokeFirst.Add(1)
					lat = 0
				}
				wake.add(lat)
				sentToWake.add(woke.Sub(d.sent))
				createLat.add(t1.Sub(t0))
				decideLat.add(d.answered.Sub(d.sent))
				consumeLat.add(t3.Sub(t2))
				cycleLat.add(t3.Sub(t0))
			}
		}()
	}

	// CPU of the server, the tool and the rest of the machine over the
	// measured window.
	cpuc := make(chan *cpuWindow, 1)
	peerc := make(chan *peerCPU, 1)
	go func() {
		defer close(cpuc)
		select {
		case <-time.After(time.Until(measureFrom)):
		case <-ctx.Done():
			return
		}
		w, err := startCPU(srv.pid())
		if err != nil {
			f.fail(fmt.Errorf("read CPU time: %w", err))
			return
		}
		peerc <- startPeerCPU(srv, o.databaseURL != "")
		cpuc <- w
	}()

	awg.Wait()
	close(jobs)
	dwg.Wait()
	cpu := <-cpuc
	if f.err != nil {
		return f.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := srv.allAlive(); err != nil {
		return err
	}
	n := cycles.Load()
	if n == 0 {
		return errors.New("no cycle completed in the measured window")
	}

	secs := o.duration.Seconds()
	out.comment("cycles: agents=%d deciders=%d warmup=%s duration=%s settle=%s", o.agents, o.deciders, o.warmup, o.duration, o.settle)
	out.count("cycles_agents", int64(o.agents))
	out.count("cycles_completed", n)
	out.metric("cycles_per_second", float64(n)/secs, "1/s")
	out.latencies("decision_to_wake", &wake)
	out.count("decision_to_wake_waiter_answered_first", wokeFirst.Load())
	out.latencies("decision_sent_to_wake", &sentToWake)
	out.latencies("create_roundtrip", &createLat)
	out.latencies("decision_roundtrip", &decideLat)
	out.latencies("consume_roundtrip", &consumeLat)
	out.latencies("cycle", &cycleLat)
	if cpu == nil {
		return errors.New("the measured window never started")
	}
	if err := cpu.report(out); err != nil {
		return err
	}
	(<-peerc).report(out)
	return nil
}
