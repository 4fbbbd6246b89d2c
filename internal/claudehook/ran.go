package claudehook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client/api"
	"github.com/countersign/countersign/internal/saferm"
	"github.com/countersign/countersign/internal/visible"
)

// maxCallID bounds the agent's id of a call that a request names (the
// server's bound): a longer or unreadable id is not sent, and that call's
// report of what ran is not made.
const maxCallID = 200

// callID is the agent's id of the call as the request names it, or "".
func callID(in *Input) string {
	id := in.ToolUseID
	if id == "" || len(id) > maxCallID || visible.Line(id) != id {
		return ""
	}
	return id
}

// reportTimeout bounds a report of what ran: after the fact, nothing
// waits on it but the agent.
const reportTimeout = 15 * time.Second

// reportRan tells the server what ran for a call that the hook asked a
// human about, so that the server compares it with the approval the call
// consumed (ran_other_than_approved). It answers nothing: after the fact
// the hook cannot block, and a failure is written to standard error only.
// The command hook reports only the calls it marked when their approval
// came (markAsked), so that a call decided locally touches no network
// after it ran either; the HTTP hook, inside the server, reports each.
func reportRan(ctx context.Context, e *Env, opts Options, p *Protocol, in *Input) {
	id := callID(in)
	if id == "" {
		return
	}
	mark := ""
	if !e.ReportAll {
		if mark = askedMark(e.Getenv, p.Agent, in.SessionID, id); mark == "" {
			return
		}
		if _, err := os.Stat(mark); err != nil {
			return // not asked by this hook: nothing to report
		}
	}
	load := e.Load
	if load.Getenv == nil {
		load.Getenv = e.Getenv
	}
	cfg, err := saferm.LoadConfig(saferm.Invocation{ConfigFile: opts.Config, ServerURL: opts.Server}, load)
	switch {
	case err != nil:
		fmt.Fprintf(e.Stderr, "countersign: cannot report what ran: the configuration cannot be read: %v\n", err)
		return
	case cfg.ServerURL == "" || cfg.AgentKey == "":
		fmt.Fprintf(e.Stderr, "countersign: cannot report what ran: no countersign server is configured (COUNTERSIGN_URL and COUNTERSIGN_KEY, or server_url and agent_key in %s)\n", configName(cfg))
		return
	}
	if e.Connect == nil {
		// This binary has no HTTP client: the countersign binary reports,
		// on the same input, and removes the mark.
		err := errors.New("this binary cannot reach the server")
		if e.Handoff != nil {
			err = e.Handoff()
		}
		fmt.Fprintf(e.Stderr, "countersign: cannot report what ran: %v\n", err)
		return
	}
	if mark != "" {
		defer os.Remove(mark)
	}
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	r, err := e.Connect(cfg.ServerURL, cfg.AgentKey).ReportRan(ctx, api.RanInput{
		CallID: id, SessionID: visible.Line(in.SessionID), Agent: p.Agent, Action: in.ToolName, Arguments: arguments(in.ToolInput),
	})
	var ce *api.Error
	switch {
	case errors.As(err, &ce) && ce.Code == string(countersign.ENOTFOUND):
		// The call consumed no approval of this key: nothing to compare.
	case err != nil:
		fmt.Fprintf(e.Stderr, "countersign: cannot report what ran to %s: %v\n", cfg.ServerURL, unwrapURL(err))
	case !r.Ran.AsApproved:
		fmt.Fprintf(e.Stderr, "countersign: what ran is not what was approved (%s); the audit log and the inbox say so\n", r.Reference)
	}
}

// markAsked marks, on disk, a call whose approval the hook got from the
// server, for the report of what ran after it (reportRan). A mark older
// than a day is removed: its call never reported.
func markAsked(e *Env, p *Protocol, in *Input) {
	id := callID(in)
	if id == "" || e.ReportAll {
		return
	}
	mark := askedMark(e.Getenv, p.Agent, in.SessionID, id)
	if mark == "" {
		return
	}
	dir := filepath.Dir(mark)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fmt.Fprintf(e.Stderr, "countersign: cannot keep the mark of this call, so what ran will not be reported: %v\n", err)
		return
	}
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		fmt.Fprintf(e.Stderr, "countersign: cannot keep the mark of this call, so what ran will not be reported: %v\n", err)
		return
	}
	if list, err := os.ReadDir(dir); err == nil && len(list) > 1 {
		for _, f := range list {
			if fi, err := f.Info(); err == nil && time.Since(fi.ModTime()) > 24*time.Hour {
				os.Remove(filepath.Join(dir, f.Name()))
			}
		}
	}
}

// askedMark is the file that marks an asked call: in the user's state
// directory ($XDG_STATE_HOME, else ~/.local/state), named by a hash of the
// agent, the session and the call. "" without a home.
func askedMark(getenv func(string) string, agent, session, call string) string {
	dir := getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(dir) {
		home := getenv("HOME")
		if !filepath.IsAbs(home) {
			return ""
		}
		dir = filepath.Join(home, ".local", "state")
	}
	sum := sha256.Sum256([]byte(agent + "\x00" + session + "\x00" + call))
	return filepath.Join(dir, "countersign", "asked", hex.EncodeToString(sum[:]))
}

// readAfter reads a Claude Code input of a call that ran (PostToolUse,
// PostToolUseFailure): the call as it ran.
func readAfter(data []byte, name string) (*Input, error) {
	var in Input
	if err := json.Unmarshal(data, &in); err != nil {
		return &Input{Event: name}, fmt.Errorf("the hook input does not have the documented shape: %v", err)
	}
	in.Event = name
	return &in, nil
}
