package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/clientconfig"
)

const doctorUsage = `usage: countersign doctor [--config FILE] [--server URL] [--settings FILE]…
                          [--data DIR | --database-url URL] [--secret-key-file FILE]
                          [--public-url URL] [--mcp-config FILE]

Checks a set-up and says, one line each, what is right and what to fix: the
server answers, its public URL, notifications, the rm wrapper, the Claude
Code hook, the MCP gateway's upstreams, the data directory and the secret
key file. A check that does not apply where it runs says "skip" and why.
It tightens no mode, makes no file and upgrades no schema: it reads the
store's schema version read-only, and opens the store, as notify status
does, only once the data directory and the key file passed and that
version is this binary's; a store at another version is left as it is (a
warning: start countersign serve of this version to upgrade it). Exit
status 1 when a check failed.`

// doctorTimeout bounds each network check: a server or an upstream that
// does not answer within it is reported, not waited for.
const doctorTimeout = 10 * time.Second

// finding is one line of doctor's report.
type finding struct {
	status string // statusOK, statusWarn, statusFail or statusSkip
	check  string
	text   string
	fix    string // what to do; "" when nothing
}

const (
	statusOK   = "ok"
	statusWarn = "warn"
	statusFail = "FAIL"
	statusSkip = "skip"
)

// doctor is one run of countersign doctor: what it was told and what it
// found.
type doctor struct {
	env        *Env
	client     *clientconfig.Config
	clientErr  error
	configFile string
	serverFlag string
	settings   []string
	where      *storeLocation
	data       string
	publicFlag string
	mcpConfig  string
	findings   []finding
	// storeSafe says the data directory and key file passed, so that the
	// store may be opened to read the notifications' state: opening one
	// would tighten what the checks report.
	storeSafe bool
}

func runDoctor(ctx context.Context, env *Env, args []string) error {
	d := &doctor{env: env}
	fs := newFlags(env, "doctor")
	fs.Usage = func() { fmt.Fprintln(env.Stderr, doctorUsage); fs.PrintDefaults() }
	fs.StringVar(&d.configFile, "config", "", "the agent-side configuration file (COUNTERSIGN_CONFIG; default ~/.config/countersign/config.toml, then /etc/countersign/config.toml)")
	fs.StringVar(&d.serverFlag, "server", "", "the server's URL (COUNTERSIGN_URL; default the configuration's server_url)")
	fs.Func("settings", "a Claude Code settings.json to check for the hook; repeat for several (default ~/.claude/settings.json, .claude/settings.json, .claude/settings.local.json)", func(v string) error {
		d.settings = append(d.settings, v)
		return nil
	})
	d.where = storeFlagsFor(env, fs, fs.String("data", "", "the server's data directory (COUNTERSIGN_DATA; default ./countersign-data)"))
	fs.StringVar(&d.publicFlag, "public-url", "", "the server's public URL (COUNTERSIGN_PUBLIC_URL)")
	fs.StringVar(&d.mcpConfig, "mcp-config", env.Getenv("COUNTERSIGN_MCP_CONFIG"), "the MCP gateway's configuration (COUNTERSIGN_MCP_CONFIG)")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, rest[0])
	}
	d.data = dataDir(env, *d.where.data)
	d.client, d.clientErr = clientconfig.Load(clientconfig.Options{ConfigFile: d.configFile, ServerURL: d.serverFlag, Getenv: env.Getenv})

	d.checkServer(ctx)
	d.checkPublicURL()
	d.checkDataDir()
	d.checkNotifications(ctx)
	d.checkRm()
	d.checkHook()
	d.checkMCP(ctx)
	return d.report()
}

// add records a finding.
func (d *doctor) add(status, check, text, fix string) {
	d.findings = append(d.findings, finding{status: status, check: check, text: text, fix: fix})
}

// report prints the findings and ends with exit status 1 when one failed.
func (d *doctor) report() error {
	failed := 0
	for _, f := range d.findings {
		fmt.Fprintf(d.env.Stdout, "%-4s  %-14s %s\n", f.status, f.check, f.text)
		if f.fix != "" {
			label := "fix:"
			if f.status == statusSkip {
				label = "to set it up:"
			}
			fmt.Fprintf(d.env.Stdout, "      %-14s %s %s\n", "", label, f.fix)
		}
		if f.status == statusFail {
			failed++
		}
	}
	switch failed {
	case 0:
		fmt.Fprintln(d.env.Stdout, "\nno problem found")
		return nil
	case 1:
		fmt.Fprintln(d.env.Stdout, "\n1 problem found")
	default:
		fmt.Fprintf(d.env.Stdout, "\n%d problems found\n", failed)
	}
	return exitError{code: 1}
}

// besideServer says whether doctor runs where the server does: a data
// directory with a store, a database URL or a public URL is configured.
func (d *doctor) besideServer() bool {
	if u, err := d.where.url(); err == nil && u != "" {
		return true
	}
	if d.configuredPublic() != "" {
		return true
	}
	return requireStore(d.data) == nil
}

// configuredPublic is the public URL from the flag or the environment.
func (d *doctor) configuredPublic() string {
	if d.publicFlag != "" {
		return d.publicFlag
	}
	return d.env.Getenv("COUNTERSIGN_PUBLIC_URL")
}

// serverURL is the URL to reach the server at, and where it came from.
func (d *doctor) serverURL() (string, string) {
	if d.client != nil && d.client.ServerURL != "" {
		from := "server_url in " + d.client.Source()
		switch {
		case d.serverFlag != "":
			from = "--server"
		case d.env.Getenv("COUNTERSIGN_URL") != "":
			from = "COUNTERSIGN_URL"
		}
		return d.client.ServerURL, from
	}
	if p := d.configuredPublic(); p != "" {
		return p, "the public URL"
	}
	if d.besideServer() {
		return "http://" + envOr(d.env, "COUNTERSIGN_ADDR", "127.0.0.1:8080"), "the listening address"
	}
	return "", ""
}

// checkServer: the server answers /healthz at the configured URL.
func (d *doctor) checkServer(ctx context.Context) {
	const check = "server"
	if d.clientErr != nil {
		d.add(statusFail, check, "the agent-side configuration does not load: "+d.clientErr.Error(),
			"correct the file, or name another with --config or COUNTERSIGN_CONFIG")
	}
	raw, from := d.serverURL()
	if raw == "" {
		d.add(statusFail, check, "no server URL is configured for the agents",
			`set server_url = "https://HOST" in ~/.config/countersign/config.toml (or /etc/countersign/config.toml), or COUNTERSIGN_URL`)
		return
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		d.add(statusFail, check, fmt.Sprintf("the server URL from %s is not an http or https URL", from),
			`set it to the server's address, such as https://approve.example.com`)
		return
	}
	shown := showURL(u)
	health := u.JoinPath("/healthz")
	health.User, health.RawQuery, health.Fragment = nil, "", ""
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, health.String(), nil)
	if err != nil {
		d.add(statusFail, check, shown+": "+err.Error(), "")
		return
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		d.add(statusFail, check, fmt.Sprintf("%s (from %s) does not answer: %s", shown, from, netReason(err, u)),
			"start it with countersign serve, or correct "+from)
		return
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		d.add(statusOK, check, fmt.Sprintf("%s (from %s) answers", shown, from), "")
	case http.StatusServiceUnavailable:
		d.add(statusFail, check, fmt.Sprintf("%s answers /healthz with 503: its store cannot write", shown),
			"see the server's log: a full disk or a database it cannot reach")
	default:
		d.add(statusFail, check, fmt.Sprintf("%s answers /healthz with %d: is it a countersign server?", shown, resp.StatusCode),
			"correct "+from+" to the server's own URL")
	}
}

// netReason is a network error without the URL, which may hold a secret.
func netReason(err error, u *url.URL) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", doctorTimeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	s := err.Error()
	return strings.ReplaceAll(s, u.String(), showURL(u))
}

// showURL is a URL as doctor prints it: scheme, host and path, without a
// user, a password or a query, which may hold a secret.
func showURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.Fragment, c.ForceQuery = nil, "", "", false
	return c.String()
}

// checkPublicURL: the public URL has a host name, which passkeys need, or
// step-up is off, and why.
func (d *doctor) checkPublicURL() {
	const check = "public URL"
	if !d.besideServer() {
		d.add(statusSkip, check, "no server configuration here (no data directory "+d.data+", no COUNTERSIGN_PUBLIC_URL): run doctor beside the server to check it", "")
		return
	}
	public, err := publicURL(d.configuredPublic(), envOr(d.env, "COUNTERSIGN_ADDR", "127.0.0.1:8080"))
	if err != nil {
		d.add(statusFail, check, strings.TrimPrefix(err.Error(), ErrUsage.Error()+": "), "")
		return
	}
	shown := showURL(public)
	stepUp := d.env.Getenv("COUNTERSIGN_STEP_UP")
	if _, err := approval.ParseStepUp(stepUp); err != nil {
		d.add(statusFail, check, "COUNTERSIGN_STEP_UP does not parse: "+err.Error(), "")
		return
	}
	chosen := strings.TrimSpace(stepUp) != "" && strings.TrimSpace(stepUp) != "none"
	rpErr := protocolRPID(public)
	switch {
	case rpErr == nil && strings.TrimSpace(stepUp) == "none":
		d.add(statusOK, check, shown+" has a host name for passkeys; step-up is off (COUNTERSIGN_STEP_UP=none)", "")
	case rpErr == nil:
		d.add(statusOK, check, shown+" has a host name: passkeys and step-up are on", "")
	case chosen:
		d.add(statusFail, check, shown+" has no host name, and COUNTERSIGN_STEP_UP needs passkeys: the server refuses to start",
			"set COUNTERSIGN_PUBLIC_URL to a name, such as https://approve.example.com (or http://localhost:8080 on one machine)")
	case strings.TrimSpace(stepUp) == "none":
		d.add(statusOK, check, shown+" has no host name; passkeys are off, and step-up too (COUNTERSIGN_STEP_UP=none)", "")
	default:
		d.add(statusWarn, check, shown+" has no host name: passkeys are off, so no approval needs one (step-up is off)",
			"for passkeys, set COUNTERSIGN_PUBLIC_URL to a name, such as https://approve.example.com (or http://localhost:8080 on one machine)")
	}
}
