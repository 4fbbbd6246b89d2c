package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/client"
	"github.com/jackc/pgx/v5"
)

// This file runs the servers on PostgreSQL (--database-url), in a fresh
// schema dropped afterwards, and as several replicas of one database
// (--replicas, cycles only): agent i creates, waits and consumes on replica
// i mod N, and its decision is made on replica i+1 mod N, so that with two
// replicas every wake-up crosses from one process to the other through
// LISTEN/NOTIFY.

// startServers starts the servers of a run: one on a fresh data
// directory, or o.replicas on a fresh schema of o.databaseURL. The first
// does the first start; the others are its peers. stop ends them all and
// drops the schema; it reports the first unclean exit.
func startServers(ctx context.Context, o *options, bin string, maxPending int, stderr io.Writer) (srv *server, stop func() error, err error) {
	if o.databaseURL == "" {
		srv, err := startServer(ctx, bin, maxPending, o.keep, o.serverEnv, stderr)
		if err != nil {
			return nil, nil, err
		}
		return srv, srv.stop, nil
	}
	schemaURL, drop, err := freshSchema(ctx, o.databaseURL)
	if err != nil {
		return nil, nil, err
	}
	// Every replica of a PostgreSQL store opens it with the same secret
	// key file.
	keyDir, err := os.MkdirTemp("", "countersign-load-key-")
	if err != nil {
		drop()
		return nil, nil, err
	}
	dropAll := func() { drop(); os.RemoveAll(keyDir) }
	keyFile := filepath.Join(keyDir, "secret.key")
	if b, err := exec.CommandContext(ctx, bin, "secret-key", "create", keyFile).CombinedOutput(); err != nil {
		dropAll()
		return nil, nil, fmt.Errorf("countersign secret-key create: %w: %s", err, b)
	}
	env := append([]string{"COUNTERSIGN_DATABASE_URL=" + schemaURL, "COUNTERSIGN_SECRET_KEY_FILE=" + keyFile}, o.serverEnv...)
	srv, err = startServer(ctx, bin, maxPending, o.keep, env, stderr)
	if err != nil {
		dropAll()
		return nil, nil, err
	}
	var once sync.Once
	var stopErr error
	stop = func() error {
		once.Do(func() {
			for _, s := range srv.replicas() {
				if err := s.stop(); err != nil && stopErr == nil {
					stopErr = err
				}
			}
			dropAll()
		})
		return stopErr
	}
	for range o.replicas - 1 {
		peer, err := startPeer(ctx, srv, maxPending, env, stderr)
		if err != nil {
			stop()
			return nil, nil, err
		}
		srv.peers = append(srv.peers, peer)
	}
	return srv, stop, nil
}

// freshSchema creates a schema named countersign_load_… in the database
// and returns the URL that puts the servers in it, and a function that
// drops it.
func freshSchema(ctx context.Context, dbURL string) (string, func(), error) {
	u, err := url.Parse(dbURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, errors.New("--database-url must be a postgres:// URL")
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "countersign_load_" + hex.EncodeToString(b[:])
	exec := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return fmt.Errorf("connect to --database-url: %w", err)
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	// The servers' connections carry the schema's name, so that the CPU
	// of their backends can be told from that of other work on the same
	// cluster (ownBackends).
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	ownApp, adminURL = schema, dbURL
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			fmt.Fprintf(os.Stderr, "countersign-load: drop schema %s: %v\n", schema, err)
		}
	}
	return u.String(), drop, nil
}

// startPeer starts another replica on the first one's database; it shares
// the first one's credentials.
func startPeer(ctx context.Context, first *server, maxPending int, env []string, stderr io.Writer) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	data, err := os.MkdirTemp("", "countersign-load-data-")
	if err != nil {
		return nil, err
	}
	s := &server{bin: first.bin, addr: addr, base: "http://" + addr, data: data, keep: first.keep, exited: make(chan struct{}),
		metricsC: &http.Client{Transport: newTransport(4), Timeout: 10 * time.Second},
		agentKey: first.agentKey, token: first.token}
	s.cmd = exec.Command(s.bin, "serve", "--addr", addr, "--data", filepath.Join(data, "unused"), "--rate-limit", "0",
		"--max-pending", strconv.Itoa(maxPending), "--log-level", "warn")
	s.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + data}, env...)
	s.cmd.Stderr = stderr
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(data)
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(data)
		return nil, fmt.Errorf("start %s serve: %w", s.bin, err)
	}
	go func() {
		// A peer finds the database set up and prints nothing; drain
		// anyway.
		io.Copy(io.Discard, bufio.NewReader(stdout))
	}()
	go func() {
		s.exitErr = s.cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitHealthy(ctx); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// replicas returns the server and its peers.
func (s *server) replicas() []*server {
	return append([]*server{s}, s.peers...)
}

// replica returns the i-th replica, round robin.
func (s *server) replica(i int) *server {
	all := s.replicas()
	return all[i%len(all)]
}

// allAlive reports an error when any replica has exited.
func (s *server) allAlive() error {
	for _, r := range s.replicas() {
		if err := r.alive(); err != nil {
			return err
		}
	}
	return nil
}

// peerCPU measures, over the same window as cpuWindow, the CPU of the
// peers and of the PostgreSQL server's processes, which cpuWindow counts
// among the other processes of the machine.
type peerCPU struct {
	at             time.Time
	peers, pg      time.Duration
	server         *server
	withPostgreSQL bool
	// own is the CPU of each backend of the servers' connections.
	own map[int]time.Duration
}

func startPeerCPU(s *server, withPostgreSQL bool) *peerCPU {
	w := &peerCPU{at: time.Now(), server: s, withPostgreSQL: withPostgreSQL}
	w.peers, w.pg = w.read()
	if withPostgreSQL {
		w.own = ownBackends()
	}
	return w
}

// ownApp is the application_name of the servers' connections to
// PostgreSQL, and adminURL the database the tool reads pg_stat_activity
// from.
var ownApp, adminURL string

// ownBackends returns the CPU used so far by each PostgreSQL backend that
// serves a connection of the servers (application_name ownApp, and its
// listeners'), by pid.
func ownBackends() map[int]time.Duration {
	out := map[int]time.Duration{}
	if ownApp == "" {
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return out
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 OR application_name = $1 || ' listener'`, ownApp)
	if err != nil {
		return out
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return out
	}
	for _, pid := range pids {
		if d, err := procCPU(int(pid)); err == nil {
			out[int(pid)] = d
		}
	}
	return out
}

func (w *peerCPU) read() (peers, pg time.Duration) {
	for _, p := range w.server.peers {
		if d, err := procCPU(p.pid()); err == nil {
			peers += d
		}
	}
	if w.withPostgreSQL {
		pg = postgresCPU()
	}
	return peers, pg
}

// report prints the cores the peers and PostgreSQL used on average.
func (w *peerCPU) report(out *printer) {
	if w == nil {
		return
	}
	secs := time.Since(w.at).Seconds()
	peers, pg := w.read()
	if len(w.server.peers) > 0 {
		out.metric("peer_replicas_cpu_cores", (peers-w.peers).Seconds()/secs, "cores")
	}
	if w.withPostgreSQL {
		out.metric("postgres_cpu_cores", (pg-w.pg).Seconds()/secs, "cores")
		// A backend seen only at the end began during the window: all
		// of its CPU counts. One that ended during it is missed.
		var own time.Duration
		for pid, d := range ownBackends() {
			own += d - w.own[pid]
		}
		out.metric("postgres_own_backends_cpu_cores", own.Seconds()/secs, "cores")
	}
}

// postgresCPU sums the CPU time of the processes named postgres on this
// machine (the cluster the servers use, when it is local).
func postgresCPU() time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var total time.Duration
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		if d, err := procCPU(pid); err == nil {
			total += d
		}
	}
	return total
}

// clientsOf returns one client per replica with the credential, all on one
// transport.
func clientsOf(s *server, credential string, tr *http.Transport) []*client.Client {
	var out []*client.Client
	for _, r := range s.replicas() {
		out = append(out, r.clientFor(credential, tr))
	}
	return out
}
