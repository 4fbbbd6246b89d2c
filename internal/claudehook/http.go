package claudehook

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/internal/saferm"
)

// HTTPHook answers Claude Code's HTTP hook ("type": "http") in the
// server's process: the same Run as the command hook, on the input Claude
// Code posts, with the key the hook sent and a server client that asks
// through the server's own API.
type HTTPHook struct {
	// Load is how the configuration file is found, as the command hook
	// finds it; its Getenv is the process's environment when nil.
	Load saferm.LoadOptions
}

// Answer answers one input. Claude Code takes a failed or non-JSON HTTP
// answer as no decision and goes on, so what the command hook says with
// exit status 2 — a blocked call — is written as JSON that denies, and a
// call left to Claude Code is an empty object. projectDir is Claude
// Code's project directory (ProjectDirHeader), which the command hook
// reads from its environment's CLAUDE_PROJECT_DIR; path is Claude Code's
// PATH (PathHeader), on which the rm wrapper's links are found.
func (h *HTTPHook) Answer(ctx context.Context, input []byte, timeout time.Duration, projectDir, path string, start time.Time,
	serverURL, key string, ask saferm.Server) []byte {
	load := h.Load
	getenv := load.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	load.Getenv = func(k string) string {
		switch k {
		case "COUNTERSIGN_URL":
			return serverURL
		case "COUNTERSIGN_KEY":
			return key
		case "CLAUDE_PROJECT_DIR":
			return projectDir
		case "PATH":
			return path
		}
		return getenv(k)
	}
	var stdout, stderr bytes.Buffer
	e := &Env{
		Args:  []string{"--timeout", strconv.Itoa(int(timeout / time.Second))},
		Stdin: bytes.NewReader(input), Stdout: &stdout, Stderr: &stderr,
		Getenv: load.Getenv, Start: start, Load: load,
		Connect:   func(string, string) saferm.Server { return ask },
		ReportAll: true,
	}
	if Run(ctx, e) == ExitOK {
		if stdout.Len() == 0 {
			return []byte("{}\n")
		}
		return stdout.Bytes()
	}
	reason := strings.TrimSpace(stderr.String())
	if reason == "" {
		reason = "countersign: the hook failed; the call is blocked"
	}
	return Blocked(input, reason)
}

// Blocked is the JSON answer that denies the call of the input: a deny of
// its event, or, for an input whose event cannot be read, the answer that
// blocks whatever the event.
func Blocked(input []byte, reason string) []byte {
	var head struct {
		Event string `json:"hook_event_name"`
	}
	json.Unmarshal(input, &head)
	if out := deny("%s", reason).render(head.Event); out != nil {
		return out
	}
	out, _ := json.Marshal(struct {
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
	}{"block", reason})
	return append(out, '\n')
}
