package saferm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client/api"
	"github.com/countersign/countersign/internal/visible"
)

// Exit statuses of the wrapper, after the seed: 1 for every refusal, 130
// (as after SIGINT) for a stopped session or Ctrl-C.
const (
	ExitRefused = 1
	ExitUsage   = 2
	ExitStopped = 130
)

// Env is what the wrapper sees of its process, so that tests run it in
// process with a fake exec.
type Env struct {
	Args      []string // the wrapper's and rm's arguments, without argv[0]
	Stdout    io.Writer
	Stderr    io.Writer
	Getenv    func(string) string
	Cwd       string
	Self      string // the wrapper's own executable, never run as the real rm
	Terminal  bool   // stderr is a terminal: show a live countdown
	Interrupt <-chan os.Signal
	// Exec replaces the process with the real rm (syscall.Exec); it returns
	// only on failure.
	Exec func(path string, argv []string, env []string) error
	// Connect returns the server to ask (client.New in the countersign
	// binary). Nil in a binary without an HTTP client: a delete that needs
	// asking is handed to Handoff instead.
	Connect func(serverURL, credential string) Server
	// Handoff replaces the process with one that can ask, on the same
	// arguments; it returns only on failure.
	Handoff func() error
	Load    LoadOptions
	// LineStart is when the shell running rm's command line started
	// (ParentStart), or zero when unknown.
	LineStart time.Time
}

// Server is the countersign server as the agent-side roles ask it; the
// countersign binary's *client.Client is one.
type Server interface {
	Create(ctx context.Context, in api.CreateInput) (r *api.Request, created bool, err error)
	Get(ctx context.Context, id string) (*api.Request, error)
	Wait(ctx context.Context, id string, wait time.Duration) (*api.Request, error)
	Consume(ctx context.Context, id string) (*api.Request, error)
	Cancel(ctx context.Context, id string) (*api.Request, error)
	ReportRan(ctx context.Context, in api.RanInput) (*api.Request, error)
}

// maxRounds bounds how often the wrapper asks again when the targets
// changed between approval and execution.
const maxRounds = 3

// Run is `countersign rm …`: assess, ask when risky, and run the real rm
// only with an approval of exactly these targets. Whatever goes wrong, it
// fails closed: nothing is deleted unless the real rm is run on purpose.
func Run(ctx context.Context, e *Env) int {
	inv, err := ParseArgs(e.Args)
	if err != nil {
		e.say("%v", err)
		return ExitUsage
	}
	cfg, err := LoadConfig(inv, e.Load)
	if err != nil {
		e.say("%v; nothing was deleted", err)
		return ExitRefused
	}
	realRm, err := FindRealRm(cfg.RealRm, e.Self)
	if err != nil {
		e.say("%v; set real_rm in %s; nothing was deleted", err, configName(cfg))
		return ExitRefused
	}
	if len(inv.RmArgs) == 0 && !inv.DryRun {
		return e.exec(realRm, nil)
	}
	guard := cfg.DetectGuard(e.Getenv)
	assessor := cfg.Assessor(e.Cwd)
	assessor.LineStart = e.LineStart
	a := assessor.Assess(ctx, inv.RmArgs)
	if inv.DryRun {
		fmt.Fprint(e.Stdout, FormatDryRun(a, guard, realRm))
		return 0
	}
	if !guard.Guarded {
		return e.exec(realRm, inv.RmArgs)
	}
	switch a.Verdict() {
	case VerdictBlock:
		e.say("refused: %s; nothing was deleted", a.BlockReason)
		return ExitRefused
	case VerdictPass:
		return e.exec(realRm, inv.RmArgs)
	}
	if cfg.ServerURL == "" || cfg.AgentKey == "" {
		e.say("this delete needs a human's approval, but no countersign server is configured: set COUNTERSIGN_URL and COUNTERSIGN_KEY, or server_url and agent_key in %s; nothing was deleted", configName(cfg))
		return ExitRefused
	}
	if e.Connect == nil {
		// This binary has no HTTP client (countersign-agent): the
		// countersign binary asks, on the same arguments. Nothing has been
		// said or deleted yet.
		err := errors.New("this binary cannot ask the server")
		if e.Handoff != nil {
			err = e.Handoff()
		}
		e.say("%v; nothing was deleted", err)
		return ExitRefused
	}
	f := &flow{env: e, cfg: cfg, assessor: assessor, args: inv.RmArgs, c: e.Connect(cfg.ServerURL, cfg.AgentKey)}
	f.coveredBy, f.session, f.agent = hookApproval(e.Getenv)
	for range maxRounds {
		code, again := f.ask(ctx, a)
		if !again {
			if code < 0 && f.narrowed != nil {
				return e.exec(realRm, f.narrowed)
			} else if code < 0 {
				return e.exec(realRm, inv.RmArgs)
			}
			return code
		}
		a = assessor.Assess(ctx, inv.RmArgs)
		if a.Verdict() != VerdictAsk {
			e.say("the targets changed and no longer need asking (%s); run the command again; nothing was deleted", a.Verdict())
			return ExitRefused
		}
	}
	e.say("the targets kept changing after approval; nothing was deleted")
	return ExitRefused
}

// flow is one approval round trip with the server.
type flow struct {
	env      *Env
	cfg      *Config
	assessor *Assessor
	args     []string
	c        Server
	// coveredBy, session and agent are the hook's approval this delete
	// may run under, its agent session and its coding agent; coveredBy is
	// named in the first request only.
	coveredBy, session, agent string
	// narrowed, when set, are the arguments that delete only the
	// targets an approver kept (narrow): what runs instead of args.
	narrowed []string
}

// hookApproval reads what the Claude Code hook told this command: the id
// of the approval that let it run, the agent session and the coding
// agent. Anything not of their form is ignored; the server checks the
// rest. A coding agent the wrapper does not know drops all three: its
// session, taken as another agent's, could meet that agent's windows.
func hookApproval(getenv func(string) string) (id, session, agent string) {
	id, session, agent = getenv(EnvApproval), getenv(EnvSession), getenv(EnvAgent)
	if !IsRequestID(id) {
		id = ""
	}
	if agent != "" && countersign.CodingAgents[agent] == "" {
		return "", "", ""
	}
	if session == "" {
		agent = ""
	}
	if len(session) > 1024 || strings.IndexFunc(session, unicode.IsControl) >= 0 || !utf8.ValidString(session) {
		return "", "", ""
	}
	return id, session, agent
}

// IsRequestID reports whether s has the form of a request id: req_ and 10
// to 64 lowercase letters and digits. (Written out rather than as a
// regular expression, whose compilation every start of the wrapper would
// pay for.)
func IsRequestID(s string) bool {
	rest, ok := strings.CutPrefix(s, "req_")
	if !ok || len(rest) < 10 || len(rest) > 64 {
		return false
	}
	for _, c := range []byte(rest) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// ask asks for approval of a and waits. It returns -1 to run the real rm,
// an exit status to stop with, or again when the targets changed after the
// approval and a new one is needed.
func (f *flow) ask(ctx context.Context, a *Assessment) (code int, again bool) {
	rc := CurrentContext(f.env.Cwd)
	p := BuildPayload(a, f.args, rc)
	preview := p.Preview
	p.Preview = ""
	args, _ := json.Marshal(p)
	var req *api.Request
	err := f.call(ctx, func(ctx context.Context) (err error) {
		req, _, err = f.c.Create(ctx, api.CreateInput{
			Kind: "rm", Action: p.Command, Arguments: args, Preview: preview, RiskReasons: p.RiskReasons, Protected: a.Protected,
			// What a human reads is sent with its hidden characters
			// escaped, as the server requires.
			Context:   api.Context{User: visible.Line(rc.User), Host: visible.Line(rc.Hostname), Cwd: visible.Line(rc.Cwd), SessionID: visible.Line(f.session), Agent: f.agent},
			CoveredBy: f.coveredBy,
		})
		return err
	})
	f.coveredBy = "" // an approval covers one delete: asking again is asking a human
	if errors.Is(err, errInterrupted) {
		f.env.say("interrupted while asking; nothing was deleted")
		return ExitStopped, false
	}
	if err == nil && (req == nil || req.ID == "" || req.Status == "") {
		// 200 with "null" or "{}": not a request, and nothing to wait on.
		err = fmt.Errorf("%w: the answer is not a request", api.ErrUnreachable)
	}
	if err != nil {
		return f.serverError(err), false
	}
	if req.Status == "approved" && req.DecidedBy == countersign.DecidedByCoverage {
		agent := countersign.CodingAgents[f.agent]
		if agent == "" {
			agent = countersign.CodingAgents[countersign.AgentClaudeCode]
		}
		f.env.say("%s: covered by the approval the %s hook asked for; not asking again", req.Reference, agent)
	} else if req, code = f.wait(ctx, req); code >= 0 {
		return code, false
	}
	var used *api.Request
	err = f.call(ctx, func(ctx context.Context) (err error) {
		used, err = f.c.Consume(ctx, req.ID)
		return err
	})
	if errors.Is(err, errInterrupted) {
		f.env.say("interrupted while using the approval of %s; nothing was deleted", req.Reference)
		return ExitStopped, false
	}
	if err != nil {
		return f.serverError(err), false
	}
	// What the human approved is what runs: the targets are resolved and
	// assessed again after the approval was used, just before the real rm.
	// Other targets, or the same ones holding more (files added, a file
	// that became a tree, a new reason), are asked about again.
	now := f.assessor.Assess(ctx, f.args)
	if now.Blocked || !slices.Equal(now.Targets, a.Targets) {
		f.env.say("the targets changed since %s was approved; asking again", req.Reference)
		return 0, true
	}
	if grew(a, now) {
		f.env.say("what the targets hold grew since %s was approved; asking again", req.Reference)
		return 0, true
	}
	if used != nil && (used.Edited || used.Original != nil) {
		// The approver kept fewer targets: only those are deleted, and
		// only if they are this command's own.
		narrowed, err := f.narrow(ctx, a, used)
		if err != nil {
			f.env.say("%s was approved only as edited, but %v; nothing was deleted", req.Reference, err)
			return ExitRefused, false
		}
		f.narrowed = narrowed
		f.env.say("%s: %s kept only %d of the %d targets; deleting only those", req.Reference, oneLine(used.DecidedBy),
			len(ParseRmArgs(narrowed).Operands), len(a.Targets))
	}
	select {
	case <-f.env.Interrupt:
		f.env.say("interrupted after %s was approved; nothing was deleted", req.Reference)
		return ExitStopped, false
	default:
	}
	return -1, false
}

// wait long-polls the request until it is decided, expires, the poll
// timeout passes or Ctrl-C. It returns the approved request with -1, or an
// exit status.
func (f *flow) wait(ctx context.Context, req *api.Request) (*api.Request, int) {
	e := f.env
	e.say("waiting for approval of %s: %s", req.Reference, oneLine(req.Action))
	e.say("decide at %s (reference %s)", req.InboxURL, req.Reference)
	deadline := time.Now().Add(f.cfg.PollTimeout)
	if until := time.Until(req.ExpiresAt); until > 0 && until < f.cfg.PollTimeout {
		deadline = req.ExpiresAt.Add(2 * time.Second)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopCountdown := f.countdown(ctx, req)
	defer stopCountdown()

	type result struct {
		r   *api.Request
		err error
	}
	for {
		left := time.Until(deadline)
		if left <= 0 {
			stopCountdown()
			f.cancel(req.ID)
			e.say("no decision on %s in time; nothing was deleted", req.Reference)
			return nil, ExitRefused
		}
		done := make(chan result, 1)
		go func() {
			r, err := f.c.Wait(ctx, req.ID, min(left, 25*time.Second))
			done <- result{r, err}
		}()
		select {
		case <-e.Interrupt:
			cancel()
			stopCountdown()
			f.cancel(req.ID)
			e.say("interrupted: %s cancelled; nothing was deleted", req.Reference)
			return nil, ExitStopped
		case res := <-done:
			if res.err == nil && (res.r == nil || res.r.Status == "") {
				res.err = fmt.Errorf("%w: the answer is not a request", api.ErrUnreachable)
			}
			if res.err != nil {
				stopCountdown()
				f.cancel(req.ID)
				return nil, f.serverError(res.err)
			}
			if res.r.Status != "pending" {
				// The countdown line is cleared before the outcome
				// is said, or the outcome would be written onto it.
				stopCountdown()
			}
			if code, final := f.outcome(res.r); final {
				return res.r, code
			}
		}
	}
}

// outcome turns a request's status into what the wrapper does.
func (f *flow) outcome(r *api.Request) (code int, final bool) {
	e := f.env
	switch r.Status {
	case "pending":
		return 0, false
	case "approved":
		e.say("%s approved by %s", r.Reference, oneLine(r.DecidedBy))
		return -1, true
	case "denied":
		if r.Text != "" {
			e.say("%s denied by %s: %s; nothing was deleted", r.Reference, oneLine(r.DecidedBy), visible.Line(r.Text))
		} else {
			e.say("%s denied by %s; nothing was deleted", r.Reference, oneLine(r.DecidedBy))
		}
	case "responded":
		e.say("%s not approved; %s answered: %s", r.Reference, oneLine(r.DecidedBy), visible.Line(r.Text))
	case "stopped":
		e.say("%s: %s stopped this session; nothing was deleted", r.Reference, oneLine(r.DecidedBy))
		return ExitStopped, true
	case "expired":
		e.say("%s expired without a decision; nothing was deleted", r.Reference)
	default:
		e.say("%s is %s; nothing was deleted", r.Reference, r.Status)
	}
	return ExitRefused, true
}

// grew reports whether a deletion assessed again deletes more than the one
// a human approved: a new reason, more files or bytes, a count that now
// reaches the cap, or a target that was missing and now exists. Less (a
// file removed meanwhile) is what was approved, and more.
func grew(approved, now *Assessment) bool {
	for _, r := range now.Reasons {
		if !slices.Contains(approved.Reasons, r) {
			return true
		}
	}
	for _, m := range approved.Missing {
		if !slices.Contains(now.Missing, m) {
			return true
		}
	}
	return now.FileCount > approved.FileCount || now.Bytes > approved.Bytes ||
		now.FileCountCapped && !approved.FileCountCapped
}

// callTimeout bounds each call to the server but the long poll's.
const callTimeout = 30 * time.Second

// errInterrupted is a call given up for Ctrl-C.
var errInterrupted = errors.New("interrupted")

// call runs one call to the server, bounded by callTimeout and ended by
// Ctrl-C: a server that takes the connection and never answers must not
// hold the wrapper, and the rm its user typed, for good.
func (f *flow) call(ctx context.Context, do func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- do(ctx) }()
	select {
	case err := <-done:
		return err
	case <-f.env.Interrupt:
		cancel()
		<-done
		return errInterrupted
	}
}

// cancel gives the request up on the server, briefly: the wrapper is
// leaving anyway.
func (f *flow) cancel(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	f.c.Cancel(ctx, id)
}

// serverError says what went wrong with the server, naming it and the
// setting to fix, and refuses.
func (f *flow) serverError(err error) int {
	var ce *api.Error
	switch {
	case errors.As(err, &ce) && (ce.Status == 401 || ce.Status == 403):
		f.env.say("the countersign server at %s refused the agent key (%s); check COUNTERSIGN_KEY or agent_key in %s; nothing was deleted", f.cfg.ServerURL, ce.Message, configName(f.cfg))
	case errors.As(err, &ce):
		f.env.say("the countersign server at %s answered: %s; nothing was deleted", f.cfg.ServerURL, ce.Message)
	default:
		f.env.say("cannot reach the countersign server at %s (COUNTERSIGN_URL or server_url in %s): %v; nothing was deleted", f.cfg.ServerURL, configName(f.cfg), err)
	}
	return ExitRefused
}

// countdown shows, on a terminal, the time left on one line that updates
// every second. It returns a function that stops it and ends the line.
func (f *flow) countdown(ctx context.Context, req *api.Request) func() {
	if !f.env.Terminal {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			left := max(time.Until(req.ExpiresAt).Round(time.Second), 0)
			fmt.Fprintf(f.env.Stderr, "\r\x1b[K  %s  %d:%02d left  (Ctrl-C cancels)", req.Reference, int(left.Minutes()), int(left.Seconds())%60)
			select {
			case <-done:
				fmt.Fprint(f.env.Stderr, "\r\x1b[K")
				return
			case <-ctx.Done():
				fmt.Fprint(f.env.Stderr, "\r\x1b[K")
				return
			case <-t.C:
			}
		}
	}()
	var once bool
	return func() {
		if !once {
			once = true
			close(done)
			<-finished
		}
	}
}

func (e *Env) say(format string, args ...any) {
	fmt.Fprintf(e.Stderr, "countersign rm: "+format+"\n", args...)
}

// exec runs the real rm in place of this process.
func (e *Env) exec(realRm string, args []string) int {
	argv := append([]string{"rm"}, args...)
	err := e.Exec(realRm, argv, os.Environ())
	e.say("could not run %s: %v; nothing was deleted", realRm, err)
	return ExitRefused
}

func configName(c *Config) string {
	if c.File != "" {
		return c.File
	}
	return "~/.config/countersign/config.toml"
}

// oneLine is a text of the server's for one line of the terminal: cut to
// 120 characters, then every hidden character and line break shown as an
// escape (visible.Line), so that what comes back cannot rewrite the
// terminal.
func oneLine(s string) string {
	if r := []rune(s); len(r) > 120 {
		s = string(r[:119]) + "…"
	}
	return visible.Line(s)
}
