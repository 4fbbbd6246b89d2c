package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The floor is the cycles scenario's practical limit on this machine: a
// server of the same four calls (create, long poll, decide, consume) over
// the same net/http, with JSON bodies like countersign's, that keeps its
// requests in a map and does nothing else: no store, no audit, no
// notification, no limit, a bearer compared with a constant. Measured
// beside countersign in one run, it says how much of countersign's CPU a
// cycle is the work of the HTTP calls themselves.
//
// `countersign-load serve` and `countersign-load token create` answer as
// `countersign serve` and `countersign token create --json` do for
// startServer, so that `--bin` may name this binary:
//
//	go build -o /tmp/floor ./cmd/countersign-load
//	countersign-load --bin /tmp/floor --scenario cycles
const (
	floorKey   = "csk_floor"
	floorToken = "cst_floor"
)

// floorRequest is one request of the floor.
type floorRequest struct {
	ID        string          `json:"id"`
	Reference string          `json:"reference"`
	Kind      string          `json:"kind"`
	Action    string          `json:"action"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Status    string          `json:"status"`
	CreatedAt time.Time       `json:"created_at"`
	ExpiresAt time.Time       `json:"expires_at"`
	decided   chan struct{}   // closed at the decision
}

type floor struct {
	mu      sync.Mutex
	reqs    map[string]*floorRequest
	waiters atomic.Int64
}

// floorMain runs the floor's roles; ok is false when args name none.
func floorMain(args []string, stdout, stderr io.Writer) (code int, ok bool) {
	switch {
	case len(args) > 0 && args[0] == "serve":
		return floorServe(args[1:], stdout, stderr), true
	case len(args) > 1 && args[0] == "token" && args[1] == "create":
		fmt.Fprintf(stdout, "{\"id\":\"tok_floor\",\"token\":%q}\n", floorToken)
		return 0, true
	}
	return 0, false
}

func floorServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("countersign-load serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	for _, name := range []string{"data", "rate-limit", "max-pending", "log-level"} {
		fs.String(name, "", "taken as countersign serve takes it, and unused")
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "countersign-load serve: %v\n", err)
		return 1
	}
	f := &floor{reqs: map[string]*floorRequest{}}
	srv := &http.Server{Handler: f.routes(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "password floor\n  agent key %s\n", floorKey)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "countersign-load serve: %v\n", err)
		return 1
	}
	return 0
}

func (f *floor) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		floorJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "countersign_waiters %d\n", f.waiters.Load())
	})
	mux.HandleFunc("POST /api/v1/requests", f.bearer(floorKey, f.create))
	mux.HandleFunc("GET /api/v1/requests/{id}", f.bearer(floorKey, f.get))
	mux.HandleFunc("POST /api/v1/requests/{id}/decision", f.bearer(floorToken, f.decide))
	mux.HandleFunc("POST /api/v1/requests/{id}/consume", f.bearer(floorKey, f.consume))
	return mux
}

func (f *floor) bearer(want string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+want {
			floorError(w, http.StatusUnauthorized, "bad credential")
			return
		}
		h(w, r)
	}
}

func (f *floor) create(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Kind      string          `json:"kind"`
		Action    string          `json:"action"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&in); err != nil || in.Kind == "" || in.Action == "" {
		floorError(w, http.StatusBadRequest, "bad request")
		return
	}
	var b [12]byte
	rand.Read(b[:])
	now := time.Now().UTC()
	req := &floorRequest{ID: "req_" + hex.EncodeToString(b[:]), Reference: "FLO-" + hex.EncodeToString(b[:2])[:3],
		Kind: in.Kind, Action: in.Action, Arguments: in.Arguments, Status: "pending",
		CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute), decided: make(chan struct{})}
	f.mu.Lock()
	f.reqs[req.ID] = req
	f.mu.Unlock()
	floorJSON(w, http.StatusCreated, req)
}

// answer writes the request as it is now, under the lock.
func (f *floor) answer(w http.ResponseWriter, req *floorRequest, status int) {
	f.mu.Lock()
	b, err := json.Marshal(req)
	f.mu.Unlock()
	if err != nil {
		floorError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func (f *floor) find(w http.ResponseWriter, r *http.Request) *floorRequest {
	f.mu.Lock()
	req := f.reqs[r.PathValue("id")]
	f.mu.Unlock()
	if req == nil {
		floorError(w, http.StatusNotFound, "no such request")
	}
	return req
}

func (f *floor) get(w http.ResponseWriter, r *http.Request) {
	req := f.find(w, r)
	if req == nil {
		return
	}
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			n, nerr := strconv.Atoi(v)
			if nerr != nil {
				floorError(w, http.StatusBadRequest, "bad wait")
				return
			}
			d = time.Duration(n) * time.Second
		}
		f.waiters.Add(1)
		t := time.NewTimer(min(d, 60*time.Second))
		select {
		case <-req.decided:
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
		f.waiters.Add(-1)
	}
	f.answer(w, req, http.StatusOK)
}

func (f *floor) decide(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Decision string `json:"decision"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&in); err != nil || (in.Decision != "approve" && in.Decision != "deny") {
		floorError(w, http.StatusBadRequest, "bad decision")
		return
	}
	req := f.find(w, r)
	if req == nil {
		return
	}
	f.mu.Lock()
	ok := req.Status == "pending"
	if ok {
		req.Status = map[string]string{"approve": "approved", "deny": "denied"}[in.Decision]
		close(req.decided)
	}
	f.mu.Unlock()
	if !ok {
		floorError(w, http.StatusConflict, "already decided")
		return
	}
	f.answer(w, req, http.StatusOK)
}

func (f *floor) consume(w http.ResponseWriter, r *http.Request) {
	req := f.find(w, r)
	if req == nil {
		return
	}
	f.mu.Lock()
	ok := req.Status == "approved"
	if ok {
		req.Status = "consumed"
		delete(f.reqs, req.ID) // a used approval is done with: the floor keeps no history
	}
	f.mu.Unlock()
	if !ok {
		floorError(w, http.StatusConflict, "not approved")
		return
	}
	f.answer(w, req, http.StatusOK)
}

func floorJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func floorError(w http.ResponseWriter, status int, msg string) {
	floorJSON(w, status, map[string]map[string]string{"error": {"code": strconv.Itoa(status), "message": msg}})
}
