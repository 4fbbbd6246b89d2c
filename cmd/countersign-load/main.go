// Command countersign-load is the load benchmark of countersign: it starts a
// real `countersign serve` on 127.0.0.1 with a fresh data directory and
// drives it through the public API, as agents and as an approver.
//
// Scenarios:
//
//	cycles  N agents each loop create → long poll → an approver decides →
//	        the waiter wakes → consume; reports cycles/s and the latency from
//	        the decision's answer to the waiter's answer (decision-to-wake).
//	        With --client raw (the default) agents and deciders talk over a
//	        lean HTTP/1.1 client of their own (raw.go), which leaves more of
//	        the shared cores to the server; --client go uses ./client.
//	wake    exactly W agents hold a long poll each; one decision at a time is
//	        made only when the server counts all W waiters as parked, then
//	        the woken agent asks again; then, in --bursts rounds, all W are
//	        decided at once; reports decision-to-wake of both.
//	signin-flood  --flood-addrs loopback addresses send --flood-attempts
//	        wrong passwords each at once; meanwhile a browser that signed in
//	        before and an unknown one sign in; reports how long each took
//	        and what it was answered (signinflood.go).
//	idle    P idle long polls, each on its own pending request, held at once;
//	        reports the server's resident memory (VmRSS, VmHWM).
//	notify  a webhook receiver of the tool's own is made a channel; one
//	        agent creates requests one after the other and the tool measures
//	        from each create to its webhook's arrival (notifylatency.go).
//
// Every metric is printed as one line "name value unit"; lines starting
// with '#' are comments. The tool exits non-zero on any error, stops by
// itself, and never contacts anything but 127.0.0.1.
//
// Example (see BENCHMARKS.md for the recorded figures):
//
//	go build -o /tmp/countersign ./cmd/countersign
//	go run ./cmd/countersign-load --bin /tmp/countersign --scenario cycles --agents 50 --duration 10s
//
// With --database-url the servers run on PostgreSQL (a fresh schema of that
// database), and with --replicas 2 the cycles run on two servers sharing it,
// each decision made on the other replica than the wait (see replicas.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
)

type options struct {
	bin       string
	scenario  string
	keep      bool
	serverEnv envList
	timeout   time.Duration
	cpuprof   string
	// databaseURL puts the servers on PostgreSQL, in a fresh schema of
	// that database; replicas runs that many servers on it.
	databaseURL string
	replicas    int

	// cycles
	agents   int
	history  int // cycles: finished requests put in the store first
	deciders int
	duration time.Duration
	warmup   time.Duration
	settle   time.Duration
	client   string // raw or go

	// wake
	waiters   int
	decisions int
	bursts    int

	// signin-flood
	floodAddrs, floodAttempts int
	floodLead                 time.Duration
	floodUser                 string

	// notify
	notifications int

	// idle
	polls       int
	hold        time.Duration
	concurrency int
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if code, ok := floorMain(args, stdout, stderr); ok {
		return code
	}
	var o options
	fs := flag.NewFlagSet("countersign-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.bin, "bin", "", "path of a built countersign binary (default: go build one into a temporary directory)")
	fs.StringVar(&o.scenario, "scenario", "cycles", "cycles, wake, idle, signin-flood or notify")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary data directory")
	fs.StringVar(&o.cpuprof, "cpuprofile", "", "write a CPU profile of this tool (not of the server) to the file")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "give up (and fail) after this long in all")
	fs.StringVar(&o.databaseURL, "database-url", "", "run the servers on this PostgreSQL database, in a fresh schema dropped afterwards (default: SQLite in a temporary data directory)")
	fs.IntVar(&o.replicas, "replicas", 1, "cycles, notify: servers on the one --database-url; cycles: agent i waits on replica i mod N and is decided on replica i+1 mod N; notify: request i is created on replica i mod N")
	fs.Var(&o.serverEnv, "server-env", "NAME=VALUE added to the server's environment, such as GOGC=50 (repeatable)")
	fs.IntVar(&o.agents, "agents", 50, "cycles: concurrent agents")
	fs.IntVar(&o.history, "history", 0, "cycles, SQLite: finished requests put in the store before the run (a setup step, straight into the file), and the pending list measured after it")
	fs.IntVar(&o.deciders, "deciders", 0, "cycles: concurrent approver goroutines (default: one per agent)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "cycles: measured duration")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "cycles: unmeasured warm-up before the measured duration")
	fs.DurationVar(&o.settle, "settle", 2*time.Millisecond, "cycles: pause between the wait request leaving the agent and the decision")
	fs.StringVar(&o.client, "client", "raw", "cycles: raw (a lean HTTP/1.1 client, one connection per agent and decider, to leave the cores to the server) or go (./client on net/http)")
	fs.IntVar(&o.waiters, "waiters", 100, "wake: agents waiting at once")
	fs.IntVar(&o.decisions, "decisions", 2000, "wake: decisions made one at a time, each with all waiters parked")
	fs.IntVar(&o.bursts, "bursts", 10, "wake: rounds in which all waiters are decided at once (0: none)")
	fs.IntVar(&o.floodAddrs, "flood-addrs", 60, "signin-flood: client addresses of the flood (127.0.1.1 on)")
	fs.IntVar(&o.floodAttempts, "flood-attempts", 5, "signin-flood: wrong passwords each flood address sends at once")
	fs.StringVar(&o.floodUser, "flood-user", "admin", "signin-flood: the username the flood guesses at (\"\": each address a made-up one of its own)")
	fs.DurationVar(&o.floodLead, "flood-lead", 300*time.Millisecond, "signin-flood: how long after the flood starts the two browsers sign in")
	fs.IntVar(&o.notifications, "notifications", 100, "notify: requests created one after the other, each timed to its webhook")
	fs.IntVar(&o.polls, "polls", 10000, "idle: long polls held at once (at most 10000, the server's --max-pending bound)")
	fs.DurationVar(&o.hold, "hold", 10*time.Second, "idle: how long the polls are held while memory is sampled")
	fs.IntVar(&o.concurrency, "concurrency", 32, "idle: concurrent creations while the requests are set up")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "countersign-load: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "countersign-load: %v\n", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("the run took longer than --timeout %s", o.timeout))
	defer cancel()
	out := &printer{w: stdout}
	if o.cpuprof != "" {
		f, err := os.Create(o.cpuprof)
		if err != nil {
			fmt.Fprintf(stderr, "countersign-load: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "countersign-load: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if err := runScenario(ctx, &o, out, stderr); err != nil {
		if cause := context.Cause(ctx); cause != nil && cause != err {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
		fmt.Fprintf(stderr, "countersign-load: %v\n", err)
		return 1
	}
	return 0
}

func (o *options) check() error {
	if o.timeout < time.Second || o.timeout > 2*time.Hour {
		return errors.New("--timeout must be from 1s to 2h")
	}
	if o.history < 0 || o.history > 10_000_000 || (o.history > 0 && (o.databaseURL != "" || o.scenario != "cycles")) {
		return errors.New("--history must be from 0 to 10000000, and more than 0 only with SQLite and --scenario cycles")
	}
	if o.replicas < 1 || o.replicas > 8 || (o.replicas > 1 && (o.databaseURL == "" || (o.scenario != "cycles" && o.scenario != "notify"))) {
		return errors.New("--replicas must be from 1 to 8, and more than 1 only with --database-url and --scenario cycles or notify")
	}
	if o.client != "raw" && o.client != "go" {
		return fmt.Errorf("--client %q must be raw or go", o.client)
	}
	switch o.scenario {
	case "cycles":
		if o.agents < 1 || o.agents > 5000 {
			return errors.New("--agents must be from 1 to 5000")
		}
		if o.deciders == 0 {
			o.deciders = o.agents
		}
		if o.deciders < 1 {
			return errors.New("--deciders must be positive")
		}
		if o.duration <= 0 || o.duration > 10*time.Minute || o.warmup < 0 || o.warmup > time.Minute {
			return errors.New("--duration must be from 1ns to 10m and --warmup from 0 to 1m")
		}
		if o.settle < 0 || o.settle > time.Second {
			return errors.New("--settle must be from 0 to 1s")
		}
	case "wake":
		if o.waiters < 1 || o.waiters > 5000 {
			return errors.New("--waiters must be from 1 to 5000")
		}
		if o.decisions < 1 || o.decisions > 1_000_000 || o.bursts < 0 || o.bursts > 1000 {
			return errors.New("--decisions must be from 1 to 1000000 and --bursts from 0 to 1000")
		}
	case "idle":
		if o.polls < 1 || o.polls > 10000 {
			return errors.New("--polls must be from 1 to 10000 (the server allows at most 10000 pending requests per account)")
		}
		if o.hold < time.Second || o.hold > 40*time.Second {
			return errors.New("--hold must be from 1s to 40s (a long poll lasts at most 60s)")
		}
		if o.concurrency < 1 || o.concurrency > 1000 {
			return errors.New("--concurrency must be from 1 to 1000")
		}
	case "signin-flood":
		if o.floodAddrs < 1 || o.floodAddrs > 250 || o.floodAttempts < 1 || o.floodAttempts > 20 {
			return errors.New("--flood-addrs must be from 1 to 250 and --flood-attempts from 1 to 20")
		}
		if o.floodLead < 0 || o.floodLead > 10*time.Second {
			return errors.New("--flood-lead must be from 0 to 10s")
		}
	case "notify":
		if o.notifications < 1 || o.notifications > 100000 {
			return errors.New("--notifications must be from 1 to 100000")
		}
	default:
		return fmt.Errorf("--scenario %q must be cycles, wake, idle, signin-flood or notify", o.scenario)
	}
	return nil
}

func runScenario(ctx context.Context, o *options, out *printer, stderr io.Writer) error {
	if o.scenario == "idle" {
		// 10,000 polls need 10,000 sockets here and as many in the server,
		// which inherits this limit.
		if err := raiseNoFile(o.polls + 1000); err != nil {
			return err
		}
	}
	bin := o.bin
	if bin == "" {
		dir, err := os.MkdirTemp("", "countersign-load-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if bin, err = buildBinary(ctx, dir, stderr); err != nil {
			return err
		}
	}

	maxPending := 10
	switch o.scenario {
	case "cycles":
		maxPending = o.agents + 10
	case "wake":
		maxPending = o.waiters + 10
	case "idle":
		maxPending = o.polls
	}
	maxPending = min(maxPending, 10000)

	srv, stopServers, err := startServers(ctx, o, bin, maxPending, stderr)
	if err != nil {
		return err
	}
	defer stopServers()

	out.comment("countersign-load scenario=%s go=%s GOMAXPROCS=%d NumCPU=%d loadavg=%s server_pid=%d addr=%s max_pending=%d server_env=%q store=%s replicas=%d",
		o.scenario, runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), loadAverage(), srv.pid(), srv.addr, maxPending, []string(o.serverEnv),
		map[bool]string{false: "sqlite", true: "postgres"}[o.databaseURL != ""], o.replicas)
	switch o.scenario {
	case "cycles":
		err = runCyclesWithHistory(ctx, o, srv, out)
	case "wake":
		err = runWake(ctx, o, srv, out)
	case "idle":
		err = runIdle(ctx, o, srv, out)
	case "signin-flood":
		err = runSigninFlood(ctx, o, srv, out)
	case "notify":
		err = runNotify(ctx, o, srv, out)
	}
	if err != nil {
		return err
	}
	if err := stopServers(); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// envList is a repeatable NAME=VALUE flag.
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }

func (e *envList) Set(v string) error {
	name, _, ok := strings.Cut(v, "=")
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return fmt.Errorf("%q is not NAME=VALUE", v)
	}
	*e = append(*e, v)
	return nil
}

// raiseNoFile raises the soft limit of open files to at least want (within
// the hard limit). The server started afterwards inherits it.
func raiseNoFile(want int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	if lim.Max < uint64(want) {
		return fmt.Errorf("the hard limit of open files is %d, below the %d this scenario needs; raise it (ulimit -Hn) or use fewer --polls", lim.Max, want)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("raise RLIMIT_NOFILE: %w", err)
	}
	return nil
}

// printer writes metric lines in one stable format: "name value unit".
type printer struct{ w io.Writer }

func (p *printer) metric(name string, value float64, unit string) {
	fmt.Fprintf(p.w, "%s %s %s\n", name, formatValue(value), unit)
}

func (p *printer) count(name string, n int64) {
	fmt.Fprintf(p.w, "%s %d count\n", name, n)
}

func (p *printer) ms(name string, d time.Duration) {
	p.metric(name, float64(d)/float64(time.Millisecond), "ms")
}

func (p *printer) comment(format string, args ...any) {
	fmt.Fprintf(p.w, "# "+format+"\n", args...)
}

func formatValue(v float64) string {
	switch {
	case v == float64(int64(v)) && v < 1e15 && v > -1e15:
		return fmt.Sprintf("%d", int64(v))
	case v >= 100 || v <= -100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// runCyclesWithHistory puts o.history finished requests in the store
// first, when asked, then runs the cycles, then measures the pending list.
func runCyclesWithHistory(ctx context.Context, o *options, srv *server, out *printer) error {
	if o.history > 0 {
		took, err := addHistory(ctx, srv, o.history)
		if err != nil {
			return err
		}
		out.comment("history: %d finished requests added in %s", o.history, took.Round(time.Millisecond))
	}
	out.count("history_requests", int64(o.history))
	if err := runCycles(ctx, o, srv, out); err != nil {
		return err
	}
	list, err := measurePendingList(ctx, srv, 1000)
	if err != nil {
		return err
	}
	out.latencies("pending_list", list)
	return nil
}
