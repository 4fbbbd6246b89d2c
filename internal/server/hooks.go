package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/saferm"
)

// ClaudeHook answers Claude Code's HTTP hook, POST /api/v1/hooks/claude,
// for an agent key the server has checked: the command hook's policy, run
// in the server's process on the files of the machine it runs on, so it
// is for a server on the machine where Claude Code runs, as the same user
// (claudehook.HTTPHook). The server serves it only to a client on this
// machine (a loopback peer, not through a proxy) with a key of the one
// account the operator named (Config.ClaudeHookAccount): the policy looks
// at this machine's files (it counts what a glob matches, say) and keeps
// what it saw in the account's requests.
type ClaudeHook interface {
	// Answer answers one input; ask asks through this server's API with
	// the hook's key.
	// projectDir and path are Claude Code's project directory and PATH
	// (ProjectDirHeader, PathHeader).
	Answer(ctx context.Context, input []byte, timeout time.Duration, projectDir, path string, start time.Time,
		serverURL, key string, ask saferm.Server) []byte
}

// ProjectDirHeader carries Claude Code's project directory to the HTTP
// hook (claudehook.ProjectDirHeader), which the command hook reads from
// its environment's CLAUDE_PROJECT_DIR.
const ProjectDirHeader = "X-Countersign-Project-Dir"

// PathHeader carries Claude Code's PATH to the HTTP hook
// (claudehook.PathHeader), on which the policy finds the rm wrapper's
// links: the server's own PATH is not Claude Code's.
const PathHeader = "X-Countersign-Path"

// maxHookInput bounds a hook input, as the command hook bounds its
// standard input: a Write carries the whole file.
const maxHookInput = 64 << 20

// defaultHookTimeout is Claude Code's default timeout of a hook, which the
// hook URL's timeout parameter replaces.
const defaultHookTimeout = 600 * time.Second

// claudeHook answers one hook event. Claude Code takes an HTTP hook that
// fails — a status other than 2xx, no answer — as no decision and goes
// on, so every refusal here, a bad key too, is a 200 whose JSON denies
// the call. The body is read only once the key is known.
func (s *Server) claudeHook(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	answer := func(body []byte) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	}
	refuse := func(input []byte, format string, args ...any) {
		answer(hookBlocked(input, "countersign: "+fmt.Sprintf(format, args...)+"; the call was not run. Tell the user."))
	}
	// Before the key is known, no more of the input is read than the
	// API reads of any body: enough to deny in the shape of its event.
	peek := func() []byte {
		b, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
		return b
	}
	if err := s.rateLimit(r); err != nil {
		refuse(peek(), "too many hook calls from this address")
		return
	}
	if !localPeer(r) {
		refuse(peek(), "the server answers Claude Code's HTTP hook only for a client on its own machine (a loopback address, not through a proxy)")
		return
	}
	secret, err := bearer(r)
	if err != nil {
		refuse(peek(), "the HTTP hook sent no agent key (the header Authorization: Bearer $COUNTERSIGN_KEY, with COUNTERSIGN_KEY in Claude Code's environment and in the hook's allowedEnvVars)")
		return
	}
	agent, err := s.agentOf(r)
	if err != nil {
		var ce *countersign.Error
		if errors.As(err, &ce) && ce.Code == countersign.EUNAUTHORIZED {
			refuse(peek(), "the server at %s refused the agent key the HTTP hook sent (COUNTERSIGN_KEY)", s.cfg.PublicURL)
		} else {
			refuse(peek(), "the server could not check the agent key")
		}
		return
	}
	// A hook that is off, or a key of another account, is denied before
	// the input is read whole: up to 64 MiB is read only for a caller the
	// hook serves.
	if s.cfg.ClaudeHook == nil {
		refuse(peek(), "the server at %s does not answer Claude Code's HTTP hook (countersign serve --claude-hook ACCOUNT turns it on)", s.cfg.PublicURL)
		return
	}
	if agent.AccountID != s.cfg.ClaudeHookAccount {
		refuse(peek(), "the agent key the HTTP hook sent is not of the account the server's hook serves (countersign serve --claude-hook ACCOUNT)")
		return
	}
	if r.ContentLength > maxHookInput {
		refuse(nil, "the hook input is larger than %d MiB", maxHookInput>>20)
		return
	}
	input, err := io.ReadAll(io.LimitReader(r.Body, maxHookInput+1))
	if err != nil || len(input) > maxHookInput {
		refuse(nil, "the hook input could not be read whole (at most %d MiB)", maxHookInput>>20)
		return
	}
	// Without Claude Code's PATH the policy cannot tell the rm wrapper's
	// links, whose removal switches the wrapper off: a hook installed
	// before the header was added sends none.
	path := r.Header.Get(PathHeader)
	if path == "" {
		refuse(input, "the HTTP hook sent no PATH (the header %s: $PATH, with PATH in the hook's allowedEnvVars); install the hook again with countersign hook claude install --http", PathHeader)
		return
	}
	timeout := defaultHookTimeout
	if v := r.URL.Query().Get("timeout"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 86400 {
			refuse(input, "the hook URL's timeout must be whole seconds from 1 to 86400, as the hook's timeout in settings.json")
			return
		}
		timeout = time.Duration(n) * time.Second
	}
	// The answer may wait for a human until the hook's timeout.
	http.NewResponseController(w).SetWriteDeadline(start.Add(timeout + 10*time.Second))
	// The policy asks through this server's own API, in process, with the
	// hook's key: the same routes, rules and account as the requests of
	// the command hook.
	ask := client.New(s.cfg.PublicURL.String(), secret)
	// The hook answers an approver's edit as the input to run.
	ask.AcceptEdits = true
	ask.HTTP = &http.Client{Transport: &inProcess{h: s.handler, remote: r.RemoteAddr}}
	answer(s.answerHook(r.Context(), input, timeout, r.Header.Get(ProjectDirHeader), path, start, secret, ask))
}

// answerHook is the hook's answer to the input, or, when the policy
// panics, a deny: net/http would drop the connection, which Claude Code
// takes as no decision, and the call would run. The log gets the panic's
// kind and stack, never its value, which may hold a command or a file
// name.
func (s *Server) answerHook(ctx context.Context, input []byte, timeout time.Duration, projectDir, path string, start time.Time,
	secret string, ask saferm.Server) (out []byte) {
	defer func() {
		if v := recover(); v != nil {
			what := fmt.Sprintf("%T", v)
			if re, ok := v.(runtime.Error); ok {
				what = re.Error()
			}
			s.log.Error("the Claude Code hook failed; its call was denied", "panic", what, "stack", string(debug.Stack()))
			out = hookBlocked(input, "countersign: the hook failed inside the server; the call was not run. Tell the user.")
		}
	}()
	return s.cfg.ClaudeHook.Answer(ctx, input, timeout, projectDir, path, start, s.cfg.PublicURL.String(), secret, ask)
}

// localPeer reports whether the request's TCP peer is a loopback address
// and it names no other client: the peer itself, never X-Forwarded-For,
// which a trusted proxy sets for a client anywhere, and a request a proxy
// forwarded (it says so in X-Forwarded-For or Forwarded) is not local
// even from a proxy on this machine.
func localPeer(r *http.Request) bool {
	if r.Header.Get("X-Forwarded-For") != "" || r.Header.Get("Forwarded") != "" {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// hookBlocked is the JSON answer that denies the input's call: a deny of
// its event (PreToolUse, PermissionRequest), or the answer that blocks
// whatever the event.
func hookBlocked(input []byte, reason string) []byte {
	var head struct {
		Event string `json:"hook_event_name"`
	}
	json.Unmarshal(input, &head)
	var v any
	switch head.Event {
	case "PreToolUse":
		v = map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": head.Event,
			"permissionDecision": "deny", "permissionDecisionReason": reason}}
	case "PermissionRequest":
		v = map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": head.Event,
			"decision": map[string]any{"behavior": "deny", "message": reason}}}
	default:
		v = map[string]any{"decision": "block", "reason": reason}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return b.Bytes()
}

// inProcess is an http.RoundTripper that serves a request with the
// server's own handler, as if it came from remote.
type inProcess struct {
	h      http.Handler
	remote string
}

func (t *inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.RemoteAddr, r.RequestURI = t.remote, r.URL.RequestURI()
	if r.Body == nil {
		r.Body = http.NoBody
	}
	rec := &recorder{header: http.Header{}}
	t.h.ServeHTTP(rec, r)
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{
		Status: strconv.Itoa(rec.status) + " " + http.StatusText(rec.status), StatusCode: rec.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.header, Body: io.NopCloser(&rec.body), ContentLength: int64(rec.body.Len()), Request: r,
	}, nil
}

// recorder keeps the response of an in-process round trip.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *recorder) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}
