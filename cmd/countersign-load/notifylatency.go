package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/client"
)

// runNotify runs the notify scenario: a webhook receiver on 127.0.0.1 is
// added as a channel of the account (countersign notify add), then one
// agent creates o.notifications requests one after the other, on replica
// i mod N, and for each the tool measures from sending the create to the
// receiver having the webhook of its creation. Each request is cancelled
// once its webhook arrived, and the next one is created after a random
// pause of up to a second, so that creations fall evenly over a sender's
// poll of once a second instead of in step with it.
func runNotify(ctx context.Context, o *options, srv *server, out *printer) error {
	rcv := &hookArrivals{byID: map[string]chan time.Time{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: rcv, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()

	cmd := exec.CommandContext(ctx, srv.bin, "notify", "add", "--data", srv.data, "--name", "load",
		"--type", "webhook", "--url", "http://"+ln.Addr().String()+"/hook")
	cmd.Env = srv.cmd.Env // with COUNTERSIGN_DATABASE_URL when the server has it
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("countersign notify add: %w: %s", err, firstLine(b))
	}

	agents := clientsOf(srv, srv.agentKey, newTransport(4))
	sent, answered := &samples{}, &samples{}
	for i := range o.notifications {
		c := agents[i%len(agents)]
		args, _ := json.Marshal(map[string]int{"notification": i})
		t0 := time.Now()
		r, created, err := create(ctx, c, client.CreateInput{Kind: "generic", Action: "load.notify", Arguments: args})
		if err != nil {
			return fmt.Errorf("create %d: %w", i, err)
		} else if !created {
			return fmt.Errorf("create %d returned an existing request", i)
		}
		t1 := time.Now()
		select {
		case at := <-rcv.arrival(r.ID):
			sent.add(at.Sub(t0))
			answered.add(max(at.Sub(t1), 0))
		case <-time.After(10 * time.Second):
			return fmt.Errorf("no webhook of request %d (%s) within 10 s", i, r.ID)
		case <-ctx.Done():
			return ctx.Err()
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err = c.Cancel(cctx, r.ID)
		cancel()
		if err != nil {
			return fmt.Errorf("cancel %d: %w", i, err)
		}
		select {
		case <-time.After(rand.N(time.Second)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if rcv.failed != nil {
		return rcv.failed
	}
	out.latencies("create_to_webhook", sent)
	out.latencies("created_answer_to_webhook", answered)
	return nil
}

// hookArrivals is the webhook receiver: it notes when the webhook of each
// request's creation arrived.
type hookArrivals struct {
	mu     sync.Mutex
	byID   map[string]chan time.Time
	failed error
}

// arrival returns the channel that receives when the creation webhook of
// id arrived (made by whichever of the receiver and the agent comes first).
func (h *hookArrivals) arrival(id string) chan time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.byID[id]
	if !ok {
		c = make(chan time.Time, 1)
		h.byID[id] = c
	}
	return c
}

func (h *hookArrivals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	var b struct {
		Event   string `json:"event"`
		Request struct {
			ID string `json:"id"`
		} `json:"request"`
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(raw, &b)
	}
	if err != nil || b.Request.ID == "" {
		h.mu.Lock()
		h.failed = errors.Join(h.failed, fmt.Errorf("a webhook the receiver cannot read: %v", err))
		h.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if b.Event == "created" {
		select {
		case h.arrival(b.Request.ID) <- at:
		default: // a repeat: the first counts
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}
