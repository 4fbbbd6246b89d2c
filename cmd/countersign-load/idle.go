package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptrace"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/client"
)

// runIdle runs the idle scenario: o.polls pending requests, one long poll
// on each, all held at once while the server's resident memory is sampled.
func runIdle(ctx context.Context, o *options, srv *server, out *printer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := &failer{cancel: cancel}
	pollCtx, stopPolls := context.WithCancel(ctx)
	defer stopPolls()

	base, err := procMemory(srv.pid())
	if err != nil {
		return err
	}

	// Set up the requests with bounded concurrency.
	agent := srv.clientFor(srv.agentKey, newTransport(o.concurrency+16))
	ids := make([]string, o.polls)
	next := atomic.Int64{}
	createStart := time.Now()
	var cwg sync.WaitGroup
	for range o.concurrency {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= o.polls {
					return
				}
				args, _ := json.Marshal(map[string]int{"poll": i})
				r, created, err := create(ctx, agent, client.CreateInput{Kind: "generic", Action: "load.idle", Arguments: args})
				if err != nil {
					f.fail(fmt.Errorf("create request %d: %w", i, err))
					return
				} else if !created {
					f.fail(fmt.Errorf("create request %d returned an existing request", i))
					return
				}
				ids[i] = r.ID
			}
		}()
	}
	cwg.Wait()
	if f.err != nil {
		return f.err
	}
	createTime := time.Since(createStart)
	agent.HTTP.CloseIdleConnections()
	afterCreate, err := procMemory(srv.pid())
	if err != nil {
		return err
	}

	// Open the polls, each on its own connection. At most 256 are being
	// dialled and written at a time, so that the listen backlog never
	// overflows.
	poller := srv.clientFor(srv.agentKey, newTransport(64))
	dialing := make(chan struct{}, 256)
	var repolls atomic.Int64
	var pwg sync.WaitGroup
	openStart := time.Now()
	for i, id := range ids {
		select {
		case dialing <- struct{}{}:
		case <-ctx.Done():
			return f.errOr(ctx.Err())
		}
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for first := true; ; first = false {
				var once sync.Once
				release := func() {
					if first {
						once.Do(func() { <-dialing })
					}
				}
				tctx := httptrace.WithClientTrace(pollCtx, &httptrace.ClientTrace{
					WroteRequest: func(httptrace.WroteRequestInfo) { release() },
				})
				w, err := poller.Wait(tctx, id, 60*time.Second)
				release()
				if pollCtx.Err() != nil {
					return
				} else if err != nil {
					f.fail(fmt.Errorf("long poll %d: %w", i, err))
					return
				} else if w.Status != "pending" {
					f.fail(fmt.Errorf("long poll %d answered %q, not pending", i, w.Status))
					return
				}
				repolls.Add(1) // the wait ended: hold it again
			}
		}()
	}
	if err := srv.waitForWaiters(ctx, o.polls, 2*time.Minute); err != nil {
		f.fail(err)
		stopPolls()
		pwg.Wait()
		return f.err
	}
	openTime := time.Since(openStart)

	// Hold them, sampling memory twice a second.
	var held memory
	var selfMax int64
	holdEnd := time.Now().Add(o.hold)
	for time.Now().Before(holdEnd) && ctx.Err() == nil {
		m, err := procMemory(srv.pid())
		if err != nil {
			f.fail(err)
			break
		}
		held.rss = max(held.rss, m.rss)
		held.hwm = m.hwm
		if s, err := procMemory(os.Getpid()); err == nil {
			selfMax = max(selfMax, s.rss)
		}
		time.Sleep(500 * time.Millisecond)
	}
	stillHeld, err := srv.waiters(ctx)
	if err != nil {
		f.fail(err)
	}
	stopPolls()
	pwg.Wait()
	if f.err != nil {
		return f.err
	}
	if err := srv.alive(); err != nil {
		return err
	}
	if stillHeld != o.polls {
		return fmt.Errorf("the server counted %d waiters at the end of the hold, want %d", stillHeld, o.polls)
	}

	mib := func(kib int64) float64 { return float64(kib) / 1024 }
	out.comment("idle: polls=%d hold=%s concurrency=%d", o.polls, o.hold, o.concurrency)
	out.count("idle_polls_held", int64(stillHeld))
	out.metric("idle_create_seconds", createTime.Seconds(), "s")
	out.metric("idle_create_per_second", float64(o.polls)/createTime.Seconds(), "1/s")
	out.metric("idle_open_polls_seconds", openTime.Seconds(), "s")
	out.metric("server_rss_start", mib(base.rss), "MiB")
	out.metric("server_rss_after_create", mib(afterCreate.rss), "MiB")
	out.metric("server_rss_held_max", mib(held.rss), "MiB")
	out.metric("server_rss_held_max_mb", float64(held.rss)*1024/1e6, "MB")
	out.metric("server_vmhwm", mib(held.hwm), "MiB")
	out.metric("server_rss_per_poll", float64(held.rss-afterCreate.rss)/float64(o.polls), "KiB")
	out.metric("tool_rss_held_max", mib(selfMax), "MiB")
	out.count("idle_repolls", repolls.Load())
	return nil
}

// errOr returns the first recorded error, or err.
func (f *failer) errOr(err error) error {
	if f.err != nil {
		return f.err
	}
	return err
}
