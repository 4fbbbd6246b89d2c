package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/callview"
	"github.com/countersign/countersign/internal/visible"
)

// approverConfig is the terminal client's file, approver.toml in the user's
// config directory:
//
//	url   = "https://approve.example.com"
//	token = "cst_…"
type approverConfig struct {
	URL   string `toml:"url"`
	Token string `toml:"token"`
}

// approverClient builds the client from the flags, then the environment
// (COUNTERSIGN_URL, COUNTERSIGN_TOKEN or COUNTERSIGN_TOKEN_FILE), then the
// config file.
func approverClient(env *Env, server, token string) (*client.Client, error) {
	var file approverConfig
	// XDG_CONFIG_HOME comes from env first, so that it counts even when the
	// process has no HOME (os.UserConfigDir fails then).
	dir, err := env.Getenv("XDG_CONFIG_HOME"), error(nil)
	if dir == "" {
		dir, err = os.UserConfigDir()
	}
	if err == nil {
		path := filepath.Join(dir, "countersign", "approver.toml")
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			// It holds an approver's token: like ssh with a key, refuse
			// a file others may read or change.
			return nil, fmt.Errorf("%s is open to others (mode %04o): it holds your token; run chmod 600 %s", path, fi.Mode().Perm(), path)
		}
		if _, err := toml.DecodeFile(path, &file); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
	}
	if server == "" {
		server = envOr(env, "COUNTERSIGN_URL", file.URL)
	}
	if token == "" {
		t, err := secretFromEnv(env, "COUNTERSIGN_TOKEN")
		if err != nil {
			return nil, err
		}
		token = t
		if token == "" {
			token = file.Token
		}
	}
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	if token == "" {
		return nil, fmt.Errorf("%w: no approver token: pass --token, set COUNTERSIGN_TOKEN, or put token = \"cst_…\" in approver.toml in your config directory (create one with: countersign token create --approver NAME)", ErrUsage)
	}
	if plainRemote(server) {
		fmt.Fprintf(env.Stderr, "countersign: warning: %s is plain http to another machine; the token travels in clear text (use https)\n", redactURL(server))
	}
	return client.New(server, token), nil
}

// plainRemote reports whether a server URL is plain http to a host other
// than this machine.
func plainRemote(server string) bool {
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "http" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

func runList(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "list")
	server := fs.String("server", "", "server URL (COUNTERSIGN_URL)")
	token := fs.String("token", "", "approver token (COUNTERSIGN_TOKEN)")
	status := fs.String("status", "pending", "status to list, or 'all'")
	limit := fs.Int("limit", 50, "at most this many")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	c, err := approverClient(env, *server, *token)
	if err != nil {
		return err
	}
	st := *status
	if st == "all" {
		st = ""
	}
	list, err := c.List(ctx, st, *limit)
	if err != nil {
		return apiError(c, err)
	}
	if len(list) == 0 {
		fmt.Fprintln(env.Stdout, "no requests")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REF\tSTATUS\tKIND\tTIER\tKEY\tEXPIRES\tACTION")
	for _, r := range list {
		expires := time.Until(r.ExpiresAt).Round(time.Second).String()
		if r.Status != "pending" && r.Status != "approved" {
			expires = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Reference, r.Status, r.Kind, tierWord(r), oneLine(r.Key, 40), expires, oneLine(callview.Summary(r.Kind, r.Action, r.Arguments), 100))
	}
	return tw.Flush()
}

// tierWord is the TIER column: an MCP call's tier in words, "unknown" for
// an MCP request stored before tiers were kept, "-" for other kinds.
func tierWord(r *client.Request) string {
	switch {
	case r.Tier != "":
		return oneLine(r.Tier, 20)
	case r.Kind == "mcp":
		return "unknown"
	}
	return "-"
}

func runApprove(ctx context.Context, env *Env, args []string) error {
	return runDecide(ctx, env, "approve", args)
}

func runDeny(ctx context.Context, env *Env, args []string) error {
	return runDecide(ctx, env, "deny", args)
}

func runDecide(ctx context.Context, env *Env, decision string, args []string) error {
	fs := newFlags(env, decision)
	server := fs.String("server", "", "server URL (COUNTERSIGN_URL)")
	token := fs.String("token", "", "approver token (COUNTERSIGN_TOKEN)")
	var reason *string
	var minutes *int
	var edited *bool
	if decision == "deny" {
		reason = fs.String("reason", "", "why, told to the agent")
	} else {
		minutes = fs.Int("for", 0, "also approve similar requests of the same agent session for this many minutes (1-60)")
		edited = fs.Bool("edited", false, "approve a request another approver edited, as edited (it is shown first)")
	}
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("%w: countersign %s REFERENCE", ErrUsage, decision)
	}
	c, err := approverClient(env, *server, *token)
	if err != nil {
		return err
	}
	d := client.Decision{Decision: decision}
	if reason != nil {
		d.Text = *reason
	}
	if minutes != nil {
		d.AutoApproveMinutes = *minutes
	}
	if edited != nil && !strings.HasPrefix(rest[0], "req_") {
		binding, err := editedBinding(ctx, env, c, rest[0], *edited)
		if err != nil {
			return err
		}
		d.BindingHash = binding
	}
	r, err := c.Decide(ctx, rest[0], d)
	if err != nil {
		return apiError(c, err)
	}
	fmt.Fprintf(env.Stdout, "%s %s: %s\n", r.Reference, r.Status, oneLine(r.Action, 100))
	return nil
}

// editedBinding looks up the pending request ref before an approval:
// when another approver edited its action (a request that needs several
// approvals), it shows the edited action beside the agent's, and with
// --edited returns the binding of what it showed, which the approval then
// names; without, it refuses, so that nobody approves an edit unseen. A
// request not edited, or not found, needs nothing ("").
func editedBinding(ctx context.Context, env *Env, c *client.Client, ref string, approveEdit bool) (string, error) {
	r, err := c.Find(ctx, ref)
	if err != nil || r.Original == nil || r.Status != "pending" {
		return "", nil // the decision itself says what is wrong
	}
	fmt.Fprintf(env.Stdout, "%s was edited by an approver:\n  now:          %s\n  agent asked:  %s\n", r.Reference,
		oneLine(callview.Summary(r.Kind, r.Action, r.Arguments), 100), oneLine(callview.Summary(r.Kind, r.Action, r.Original.Arguments), 100))
	if !approveEdit {
		return "", fmt.Errorf("%s was edited since it was asked: approve the edit as shown with countersign approve --edited %s, or deny it", r.Reference, r.Reference)
	}
	return r.BindingHash, nil
}

// apiError says what went wrong with a call to the server in words that
// name the server and the setting to fix.
func apiError(c *client.Client, err error) error {
	var e *client.Error
	if errors.As(err, &e) {
		return errors.New(e.Message)
	}
	if errors.Is(err, client.ErrUnreachable) {
		return fmt.Errorf("cannot reach the countersign server at %s (set --server or COUNTERSIGN_URL): %v", redactURL(c.BaseURL), err)
	}
	return err
}

// oneLine shortens s to one line of at most n characters of what the
// agent wrote. What an agent wrote reaches a terminal here: hidden
// characters (escape sequences that erase or rewrite the line, direction
// overrides, zero-width characters) and line breaks are shown as escapes
// (visible.Line), not acted on. It is cut before it is escaped, so that no
// escape is cut in half. A tab is a space: the list's columns are
// tab-separated.
func oneLine(s string, n int) string {
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return visible.Line(strings.ReplaceAll(s, "\t", " "))
}

// redactURL is u without the password it may hold.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(the server URL)"
	}
	return p.Redacted()
}
