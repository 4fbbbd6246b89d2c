package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
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
	id      string
	replica int           // the replica the decision is made on
	wrote   chan struct{} // closed when the agent's long poll has been written to its connection
	decided chan decided  // the decider's outcome
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

	agents, deciders, closeClients, err := cycleClients(ctx, o, srv)
	if err != nil {
		return err
	}
	defer closeClients()
	replicas := len(srv.replicas())

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
	for _, decider := range deciders {
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
				err := decider.approve(ctx, j.replica, j.id)
				j.decided <- decided{sent: sent, answered: time.Now(), err: err}
			}
		}()
	}

	var awg sync.WaitGroup
	for a := range o.agents {
		awg.Add(1)
		go func() {
			defer awg.Done()
			agent, replica := agents[a], (a+1)%replicas
			for iter := 0; ctx.Err() == nil && time.Now().Before(measureTo); iter++ {
				t0 := time.Now()
				id, status, created, err := agent.create(ctx, a, iter)
				if err != nil {
					f.fail(fmt.Errorf("agent %d: create: %w", a, err))
					return
				}
				t1 := time.Now()
				if !created || status != "pending" {
					f.fail(fmt.Errorf("agent %d: create returned an existing or %s request %s", a, status, id))
					return
				}

				j := &job{id: id, replica: replica, wrote: make(chan struct{}), decided: make(chan decided, 1)}
				var once sync.Once
				markWritten := func() { once.Do(func() { close(j.wrote) }) }
				select {
				case jobs <- j:
				case <-ctx.Done():
					return
				}
				w, err := agent.wait(ctx, id, markWritten)
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
				if w != "approved" {
					f.fail(fmt.Errorf("agent %d: the long poll of %s answered %q, not approved", a, id, w))
					return
				}

				t2 := time.Now()
				c, err := agent.consume(ctx, id)
				if err != nil {
					f.fail(fmt.Errorf("agent %d: consume: %w", a, err))
					return
				}
				if c != "consumed" {
					f.fail(fmt.Errorf("agent %d: consume of %s answered %q", a, id, c))
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
	out.comment("cycles: agents=%d deciders=%d warmup=%s duration=%s settle=%s client=%s", o.agents, o.deciders, o.warmup, o.duration, o.settle, o.client)
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
