package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/countersign/countersign/client"
)

// server is one `countersign serve` child on 127.0.0.1.
type server struct {
	bin      string
	addr     string // 127.0.0.1:port
	base     string // http://127.0.0.1:port
	data     string
	keep     bool
	cmd      *exec.Cmd
	exited   chan struct{}
	exitErr  error
	agentKey string
	password string // the first start's admin password
	token    string
	metricsC *http.Client
	peers    []*server // other replicas on the same database (--replicas)

	stopOnce sync.Once
	stopErr  error
}

// buildBinary builds cmd/countersign into dir; it must run inside the
// module.
func buildBinary(ctx context.Context, dir string, stderr io.Writer) (string, error) {
	bin := filepath.Join(dir, "countersign")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/countersign/countersign/cmd/countersign")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build of countersign (run inside the module, or pass --bin): %w", err)
	}
	return bin, nil
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment
// ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startServer starts the server on a fresh data directory, reads the agent
// key it prints on first start, and creates an approver token.
func startServer(ctx context.Context, bin string, maxPending int, keep bool, env []string, stderr io.Writer) (*server, error) {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("--bin: %w", err)
	}
	data, err := os.MkdirTemp("", "countersign-load-data-")
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		os.RemoveAll(data)
		return nil, err
	}
	s := &server{bin: bin, addr: addr, base: "http://" + addr, data: data, keep: keep, exited: make(chan struct{}),
		metricsC: &http.Client{Transport: newTransport(4), Timeout: 10 * time.Second}}

	s.cmd = exec.Command(bin, "serve", "--addr", addr, "--data", data, "--rate-limit", "0",
		"--max-pending", strconv.Itoa(maxPending), "--log-level", "warn")
	// A clean environment, so that no COUNTERSIGN_* or GO* setting of the
	// caller changes the server unless asked for with --server-env.
	s.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + data}, env...)
	s.cmd.Stderr = stderr
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(data)
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(data)
		return nil, fmt.Errorf("start %s serve: %w", bin, err)
	}
	go func() {
		s.exitErr = s.cmd.Wait()
		close(s.exited)
	}()

	keyc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if f := strings.Fields(line); !sent && len(f) == 2 && f[0] == "password" {
				s.password = f[1] // before the key, which the send below publishes
			}
			if !sent && strings.HasPrefix(line, "  agent key") {
				if f := strings.Fields(line); len(f) == 3 {
					keyc <- f[2]
					sent = true
				}
			}
		}
		io.Copy(io.Discard, stdout)
		close(keyc)
	}()

	fail := func(err error) (*server, error) {
		s.stop()
		return nil, err
	}
	select {
	case k, ok := <-keyc:
		if !ok {
			return fail(errors.New("the server printed no agent key on first start"))
		}
		s.agentKey = k
	case <-s.exited:
		return fail(fmt.Errorf("the server exited at start: %v", s.exitErr))
	case <-time.After(30 * time.Second):
		return fail(errors.New("no agent key from the server within 30s"))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	if err := s.waitHealthy(ctx); err != nil {
		return fail(err)
	}

	var tok struct{ ID, Token string }
	cmd := exec.CommandContext(ctx, bin, "token", "create", "--data", data, "--approver", "admin", "--json")
	cmd.Env = s.cmd.Env // with COUNTERSIGN_DATABASE_URL when the server has it
	cmd.Stderr = stderr
	b, err := cmd.Output()
	if err != nil {
		return fail(fmt.Errorf("countersign token create: %w", err))
	}
	if err := json.Unmarshal(b, &tok); err != nil || !strings.HasPrefix(tok.Token, "cst_") {
		return fail(fmt.Errorf("countersign token create printed no token: %q", b))
	}
	s.token = tok.Token
	return s, nil
}

func (s *server) pid() int { return s.cmd.Process.Pid }

func (s *server) waitHealthy(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/healthz", nil)
		resp, err := s.metricsC.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server is not healthy after 30s: %v", err)
		}
		select {
		case <-s.exited:
			return fmt.Errorf("the server exited: %v", s.exitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop ends the server with SIGTERM (killing it after 20 s) and removes
// the data directory unless it is kept. It reports an unclean exit.
func (s *server) stop() error {
	s.stopOnce.Do(func() {
		select {
		case <-s.exited:
			s.stopErr = fmt.Errorf("the server had exited by itself: %v", s.exitErr)
		default:
			s.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.exited:
				s.stopErr = s.exitErr
			case <-time.After(20 * time.Second):
				s.cmd.Process.Kill()
				<-s.exited
				s.stopErr = errors.New("the server did not stop within 20s of SIGTERM and was killed")
			}
		}
		if !s.keep {
			os.RemoveAll(s.data)
		}
	})
	return s.stopErr
}

// alive reports an error when the server has exited.
func (s *server) alive() error {
	select {
	case <-s.exited:
		return fmt.Errorf("the server exited: %v", s.exitErr)
	default:
		return nil
	}
}

// newTransport is an HTTP transport to the local server that keeps up to
// idle connections open for reuse and never goes through a proxy.
func newTransport(idle int) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        idle,
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
}

// clientFor returns an API client with the credential on its own
// transport.
func (s *server) clientFor(credential string, tr *http.Transport) *client.Client {
	return &client.Client{BaseURL: s.base, Credential: credential, HTTP: &http.Client{Transport: tr}}
}

// waiters reads the server's countersign_waiters gauge: the waits that are
// subscribed to the hub right now.
func (s *server) waiters(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.metricsC.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read /metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("read /metrics: status %d: %v", resp.StatusCode, err)
	}
	return parseGauge(b, "countersign_waiters")
}

// parseGauge finds "name value" in a Prometheus text exposition.
func parseGauge(b []byte, name string) (int, error) {
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte(name+" "))
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(string(bytes.TrimSpace(rest)), 64)
		if err != nil {
			return 0, fmt.Errorf("metric %s: %w", name, err)
		}
		return int(v), nil
	}
	return 0, fmt.Errorf("metric %s not in /metrics", name)
}

// waitForWaiters polls the gauge until it equals want.
func (s *server) waitForWaiters(ctx context.Context, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n, err := s.waiters(ctx)
		if err != nil {
			return err
		}
		if n == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server counts %d waiters after %s, want %d", n, timeout, want)
		}
		if err := s.alive(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Microsecond):
		}
	}
}

// memory is what /proc/PID/status says of a process's memory, in KiB.
type memory struct{ rss, hwm int64 }

func procMemory(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	var m memory
	for line := range strings.Lines(string(b)) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, _ := strconv.ParseInt(f[0], 10, 64)
		switch name {
		case "VmRSS":
			m.rss = v
		case "VmHWM":
			m.hwm = v
		}
	}
	if m.rss == 0 {
		return m, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return m, nil
}

// procCPU returns the CPU time (user + system) a process has used.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name is in parentheses and may hold spaces: fields
	// are counted after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc/PID/stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc/PID/stat")
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / clkTck, nil
}

// selfCPU returns the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineBusy returns the CPU time all processes of the machine have used
// (every state of /proc/stat's cpu line but idle and iowait).
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, errors.New("unexpected /proc/stat")
	}
	var busy int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(busy) * time.Second / clkTck, nil
}

// cpuWindow measures the CPU the server, this tool and everything else on
// the machine used between start and stop.
type cpuWindow struct {
	pid                 int
	at                  time.Time
	server, self, total time.Duration
}

func startCPU(pid int) (*cpuWindow, error) {
	w := &cpuWindow{pid: pid, at: time.Now(), self: selfCPU()}
	var err error
	if w.server, err = procCPU(pid); err != nil {
		return nil, err
	}
	if w.total, err = machineBusy(); err != nil {
		return nil, err
	}
	return w, nil
}

// report prints the cores each used on average over the window, and warns
// when other processes used a noticeable share: then the figures are not
// those of a quiet machine.
func (w *cpuWindow) report(out *printer) error {
	secs := time.Since(w.at).Seconds()
	server, err := procCPU(w.pid)
	if err != nil {
		return err
	}
	total, err := machineBusy()
	if err != nil {
		return err
	}
	s := (server - w.server).Seconds() / secs
	t := (selfCPU() - w.self).Seconds() / secs
	o := max((total-w.total).Seconds()/secs-s-t, 0)
	out.metric("server_cpu_cores", s, "cores")
	out.metric("tool_cpu_cores", t, "cores")
	out.metric("other_cpu_cores", o, "cores")
	if o > 0.15 {
		out.comment("WARNING: other processes used %.2f cores during the measurement; the machine was not quiet", o)
	}
	return nil
}

// loadAverage returns the first field of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
