package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/client"
)

// runWake runs the wake scenario. o.waiters agents each hold one long poll
// on their own pending request. A decision is made only when the server's
// countersign_waiters gauge equals o.waiters: nothing else waits on this
// server, and each agent holds at most one poll, so every agent's poll is
// then subscribed to the hub, and the decision must wake it. The woken
// agent consumes and asks again, so each of the one-at-a-time decisions is
// made with exactly o.waiters agents waiting. Then, in o.bursts rounds, all
// waiters are decided at once.
func runWake(ctx context.Context, o *options, srv *server, out *printer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := &failer{cancel: cancel}
	// Agents stop when stopAgents is cancelled; that is not a failure. It
	// ends their long polls only: a create or consume in flight finishes,
	// so that no request is cut off in the middle of a write.
	agentCtx, stopAgents := context.WithCancel(ctx)
	defer stopAgents()

	agent := srv.clientFor(srv.agentKey, newTransport(2*o.waiters+16))
	approver := srv.clientFor(srv.token, newTransport(o.waiters+16))

	current := make([]atomic.Pointer[string], o.waiters) // the request each agent waits on
	woke := make([]chan time.Time, o.waiters)            // when each agent's poll answered "approved"
	var repolls atomic.Int64
	var awg sync.WaitGroup
	for a := range o.waiters {
		woke[a] = make(chan time.Time, 1)
		awg.Add(1)
		go func() {
			defer awg.Done()
			for iter := 0; ; iter++ {
				args, _ := json.Marshal(map[string]int{"waiter": a, "iteration": iter})
				if agentCtx.Err() != nil {
					return
				}
				r, created, err := create(ctx, agent, client.CreateInput{Kind: "generic", Action: "load.wake", Arguments: args})
				if err != nil {
					f.fail(fmt.Errorf("waiter %d: create: %w", a, err))
					return
				} else if !created {
					f.fail(fmt.Errorf("waiter %d: create returned an existing request", a))
					return
				}
				current[a].Store(&r.ID)
				for {
					w, err := agent.Wait(agentCtx, r.ID, 60*time.Second)
					t := time.Now()
					if agentCtx.Err() != nil {
						return
					} else if err != nil {
						f.fail(fmt.Errorf("waiter %d: long poll: %w", a, err))
						return
					}
					if w.Status == "pending" {
						repolls.Add(1) // the wait ended undecided: wait again
						continue
					}
					if w.Status != "approved" {
						f.fail(fmt.Errorf("waiter %d: long poll answered %q", a, w.Status))
						return
					}
					woke[a] <- t
					break
				}
				c, err := consume(ctx, agent, r.ID)
				if err != nil {
					f.fail(fmt.Errorf("waiter %d: consume: %w", a, err))
					return
				} else if c.Status != "consumed" {
					f.fail(fmt.Errorf("waiter %d: consume answered %q", a, c.Status))
					return
				}
			}
		}()
	}

	var seq, burst, seqRoundtrip, burstRoundtrip samples
	var wokeFirst atomic.Int64
	measure := func(a int, s, rt *samples) error {
		id := *current[a].Load()
		sent := time.Now()
		if _, err := approve(ctx, approver, id); err != nil {
			return fmt.Errorf("decide %s: %w", id, err)
		}
		answered := time.Now()
		var t time.Time
		select {
		case t = <-woke[a]:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Second):
			return fmt.Errorf("waiter %d did not wake within 30s of the decision on %s", a, id)
		}
		lat := t.Sub(answered)
		if lat < 0 {
			wokeFirst.Add(1)
			lat = 0
		}
		s.add(lat)
		rt.add(answered.Sub(sent))
		return nil
	}

	decide := func() error {
		for range o.decisions {
			if err := srv.waitForWaiters(ctx, o.waiters, 30*time.Second); err != nil {
				return err
			}
			if err := measure(rand.IntN(o.waiters), &seq, &seqRoundtrip); err != nil {
				return err
			}
		}
		for range o.bursts {
			if err := srv.waitForWaiters(ctx, o.waiters, 30*time.Second); err != nil {
				return err
			}
			go1 := make(chan struct{})
			errs := make(chan error, o.waiters)
			for a := range o.waiters {
				go func() {
					<-go1
					errs <- measure(a, &burst, &burstRoundtrip)
				}()
			}
			close(go1)
			for range o.waiters {
				if err := <-errs; err != nil {
					return err
				}
			}
		}
		return nil
	}
	start := time.Now()
	cpu, err := startCPU(srv.pid())
	if err != nil {
		return err
	}
	if err := decide(); err != nil {
		f.fail(err)
	}
	elapsed := time.Since(start)
	var cpuOut bytes.Buffer
	if err := cpu.report(&printer{w: &cpuOut}); err != nil {
		f.fail(err)
	}
	stopAgents()
	awg.Wait()
	if f.err != nil {
		return f.err
	}
	if err := srv.alive(); err != nil {
		return err
	}
	if len(seq.d) == 0 && len(burst.d) == 0 {
		return errors.New("no decision measured")
	}

	out.comment("wake: waiters=%d decisions=%d bursts=%d elapsed=%s", o.waiters, o.decisions, o.bursts, elapsed.Round(time.Millisecond))
	out.count("wake_waiters", int64(o.waiters))
	out.latencies("wake_decision_to_wake", &seq)
	out.latencies("wake_decision_roundtrip", &seqRoundtrip)
	if o.bursts > 0 {
		out.latencies("wake_burst_decision_to_wake", &burst)
		out.latencies("wake_burst_decision_roundtrip", &burstRoundtrip)
	}
	out.count("wake_waiter_answered_first", wokeFirst.Load())
	out.count("wake_repolls", repolls.Load())
	out.w.Write(cpuOut.Bytes())
	return nil
}
