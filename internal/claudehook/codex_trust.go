package claudehook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
)

// Codex runs a hook of a user's or a project's hooks.json only once it is
// trusted: the user's config.toml holds, for each hook, the hash of the
// hook as Codex normalises it,
//
//	[hooks.state."<hooks.json path>:<event>:<group>:<handler>"]
//	trusted_hash = "sha256:<hex>"
//
// where the hash is SHA-256 of the compact JSON, keys sorted, of
// {"event_name": "pre_tool_use", "matcher": …, "hooks": [the handler,
// with its timeout and async filled in]}. `hook codex install --trust`
// writes these for countersign's hooks, as a user's trust in /hooks
// would: the user installing them is the user trusting them.

// codexEventKeys are Codex's names of the events in hook keys.
var codexEventKeys = map[string]string{
	EventPreToolUse:        "pre_tool_use",
	EventPermissionRequest: "permission_request",
	EventPostToolUse:       "post_tool_use",
}

// codexTrust is one hook's trust entry.
type codexTrust struct{ key, hash string }

// codexTrusts returns the trust entries of the hooks in the hooks.json at
// path that run exactly command: the hooks install wrote, and no other
// entry that only begins like them (more commands after it, or another
// program of the same name), which Codex would then run unasked.
func codexTrusts(path, command string, events []string) ([]codexTrust, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file struct {
		Hooks map[string][]struct {
			Matcher *string           `json:"matcher"`
			Hooks   []json.RawMessage `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []codexTrust
	for _, ev := range events {
		for gi, g := range file.Hooks[ev] {
			for hi, raw := range g.Hooks {
				entry, err := parseObject(raw)
				if err != nil || entryType(entry) != "command" || !isCountersign(entry, "codex") {
					continue
				}
				var cmd string
				if c, _ := entry.get("command"); json.Unmarshal(c, &cmd) != nil || cmd != command {
					continue
				}
				hash, err := codexHookHash(codexEventKeys[ev], g.Matcher, raw)
				if err != nil {
					return nil, fmt.Errorf("%s: hooks.%s: %w", path, ev, err)
				}
				out = append(out, codexTrust{key: fmt.Sprintf("%s:%s:%d:%d", abs, codexEventKeys[ev], gi, hi), hash: hash})
			}
		}
	}
	return out, nil
}

// codexHookHash is the hash Codex trusts a command hook by.
func codexHookHash(event string, matcher *string, raw json.RawMessage) (string, error) {
	var h struct {
		Command       string  `json:"command"`
		Timeout       *uint64 `json:"timeout"`
		Async         bool    `json:"async"`
		StatusMessage *string `json:"statusMessage"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return "", err
	}
	timeout := uint64(600) // Codex's default, and at least 1
	if h.Timeout != nil {
		timeout = max(*h.Timeout, 1)
	}
	handler := map[string]any{"type": "command", "command": h.Command, "timeout": timeout, "async": h.Async}
	if h.StatusMessage != nil {
		handler["statusMessage"] = *h.StatusMessage
	}
	identity := map[string]any{"event_name": event, "hooks": []any{handler}}
	if matcher != nil {
		identity["matcher"] = *matcher
	}
	// Maps marshal with sorted keys; Codex writes <, > and & as they are.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(identity); err != nil {
		return "", err
	}
	sum := sha256.Sum256(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// trustCodexHooks writes the trust entries of countersign's hooks (those
// running command) in the hooks.json at hooks into Codex's config.toml at config: each entry's
// table is updated in place where it is, or added at the end. Nothing
// else of the file changes.
func trustCodexHooks(hooks, config, command string, events []string) (int, error) {
	trusts, err := codexTrusts(hooks, command, events)
	if err != nil {
		return 0, err
	}
	data, err := os.ReadFile(config)
	mode := fs.FileMode(0o600)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data = nil
	case err != nil:
		return 0, err
	default:
		if fi, err := os.Stat(config); err == nil {
			mode = fi.Mode().Perm()
		}
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(data) == 0 {
		lines = nil
	}
	for _, tr := range trusts {
		if strings.ContainsFunc(tr.key, func(r rune) bool { return r == '"' || r == '\\' || unicode.IsControl(r) }) {
			return 0, fmt.Errorf("the path %s cannot be written as a TOML key here: trust the hooks in Codex's /hooks", hooks)
		}
		lines = setTrust(lines, `[hooks.state."`+tr.key+`"]`, "trusted_hash = "+strconv.Quote(tr.hash))
	}
	return len(trusts), writeAtomic(config, []byte(strings.Join(lines, "\n")+"\n"), mode)
}

// setTrust sets the trusted_hash line of the table header in lines: in
// the table where it is, or in a new table at the end.
func setTrust(lines []string, header, line string) []string {
	for i, l := range lines {
		if strings.TrimSpace(l) != header {
			continue
		}
		j := i + 1
		for ; j < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[j]), "["); j++ {
			k, _, ok := strings.Cut(lines[j], "=")
			if ok && strings.TrimSpace(k) == "trusted_hash" {
				lines[j] = line
				return lines
			}
		}
		return append(lines[:i+1], append([]string{line}, lines[i+1:]...)...)
	}
	if len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) != "" {
		lines = append(lines, "")
	}
	return append(lines, header, line)
}
