package claudehook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/internal/limit"
	"github.com/countersign/countersign/internal/visible"
)

// Limits that keep a request within the server's (32 KiB of arguments,
// 16 KiB of preview, 50 reasons of 500 bytes) and readable on a phone.
const (
	maxArgs         = 30 << 10
	maxBigString    = 1 << 10
	maxPreview      = 8 << 10
	maxPreviewLines = 40
	maxReasons      = 20
	maxReason       = 480
)

// preview is what the human reads before deciding: what the coding agent
// wants to do, where, and what it would change.
func preview(in *Input, call *Call, v Verdict) string {
	var b strings.Builder
	var fields map[string]json.RawMessage
	json.Unmarshal(in.ToolInput, &fields)
	str := func(k string) string {
		var s string
		json.Unmarshal(fields[k], &s)
		return s
	}
	who := agentTitle(call.Agent)
	switch call.Tool {
	case "Bash":
		fmt.Fprintf(&b, "%s wants to run, in %s:\n\n$ %s\n", who, call.Cwd, call.Command)
		if d := str("description"); d != "" {
			fmt.Fprintf(&b, "\n(%s)\n", d)
		}
	case "Write":
		content := str("content")
		fmt.Fprintf(&b, "%s wants to write %s (%d bytes, %d lines):\n\n%s", who, call.Path, len(content), strings.Count(content, "\n")+1, excerpt(content, ""))
	case "Edit":
		fmt.Fprintf(&b, "%s wants to edit %s", who, call.Path)
		if string(fields["replace_all"]) == "true" {
			b.WriteString(" (every occurrence)")
		}
		fmt.Fprintf(&b, ":\n\n%s%s", excerpt(str("old_string"), "- "), excerpt(str("new_string"), "+ "))
	default:
		fmt.Fprintf(&b, "%s wants to use %s", who, toolTitle(call.Tool))
		if call.Path != "" {
			fmt.Fprintf(&b, " on %s", call.Path)
		}
		fmt.Fprintf(&b, ":\n\n%s", jsonExcerpt(in.ToolInput))
	}
	if len(v.Details) > 0 {
		b.WriteString("\n")
		for _, d := range v.Details {
			fmt.Fprintf(&b, "%s\n", d)
		}
	}
	// What Claude Code sends may hold characters that would hide or
	// reorder text (a carriage return, a direction override): they are
	// written as escapes, which the server requires.
	return clip(visible.String(strings.TrimRight(b.String(), "\n")), maxPreview)
}

// toolTitle names a tool for a human: MCP tools by server and tool.
func toolTitle(tool string) string {
	if rest, ok := strings.CutPrefix(tool, "mcp__"); ok {
		if server, name, ok := strings.Cut(rest, "__"); ok {
			return fmt.Sprintf("the tool %s of the MCP server %s", name, server)
		}
	}
	return tool
}

// excerpt returns the first lines of s, each with the prefix, and how many
// were left out.
func excerpt(s, prefix string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	var b strings.Builder
	for i, l := range lines {
		if i == maxPreviewLines {
			fmt.Fprintf(&b, "… %d more lines\n", len(lines)-i)
			break
		}
		b.WriteString(prefix + l + "\n")
	}
	return b.String()
}

// jsonExcerpt returns the first lines of raw JSON indented for reading,
// and how many were left out. Only what the preview can show is indented:
// the indentation of every line grows with its depth, and the whole
// rendering of a large input could be many times its size.
func jsonExcerpt(raw json.RawMessage) string {
	if !json.Valid(raw) {
		return excerpt(string(raw), "")
	}
	text, more := limit.Indent(raw, maxPreview)
	if more == 0 {
		return excerpt(text, "")
	}
	lines := strings.SplitN(text, "\n", maxPreviewLines+1)
	shown := min(len(lines), maxPreviewLines)
	var b strings.Builder
	for _, l := range lines[:shown] {
		b.WriteString(l + "\n")
	}
	fmt.Fprintf(&b, "… %d more lines\n", limit.IndentLines(raw)-shown)
	return b.String()
}

// clip shortens s to at most n bytes on a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// riskReasons are the verdict's reasons within the server's limits.
func riskReasons(rs []string) []string {
	out := make([]string, 0, min(len(rs), maxReasons))
	for i, r := range rs {
		if i == maxReasons {
			break
		}
		out = append(out, clip(visible.Line(r), maxReason))
	}
	return out
}

// arguments returns the tool input for the request's binding. An input
// too large for the server keeps its shape, with each long string
// replaced by its SHA-256 and length: the binding still covers exactly
// this content.
func arguments(raw json.RawMessage) json.RawMessage {
	if len(raw) <= maxArgs {
		return raw
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	out, err := json.Marshal(digestStrings(v))
	if err != nil || len(out) > maxArgs {
		sum := sha256.Sum256(raw)
		out, _ = json.Marshal(map[string]any{"sha256": hex.EncodeToString(sum[:]), "bytes": len(raw)})
	}
	return out
}

// digestStrings replaces the long strings of a JSON value by digests.
func digestStrings(v any) any {
	switch x := v.(type) {
	case string:
		if len(x) > maxBigString {
			sum := sha256.Sum256([]byte(x))
			return map[string]any{"sha256": hex.EncodeToString(sum[:]), "bytes": len(x)}
		}
	case map[string]any:
		for k, e := range x {
			x[k] = digestStrings(e)
		}
	case []any:
		for i, e := range x {
			x[i] = digestStrings(e)
		}
	}
	return v
}
