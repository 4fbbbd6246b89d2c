package claudehook

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// benchInputs are calls the [hook] rules of BenchmarkHookAllow allow
// locally. (The built-in defaults leave such calls to Claude Code, with
// no answer; a rule makes the hook answer "allow" itself.)
var benchInputs = []struct{ name, input string }{
	{"Read", `{"session_id":"s","cwd":"{{PROJECT}}","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"{{PROJECT}}/src/main.go"},"tool_use_id":"t"}`},
	{"Bash", `{"session_id":"s","cwd":"{{PROJECT}}","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"cd src && ls -la | grep main && git status"},"tool_use_id":"t"}`},
}

// BenchmarkHookAllow is the whole in-process path of a call the policy
// allows locally: read the input, load the configuration file, parse the
// command, decide, write the answer. (Process start is measured with
// hyperfine on the binary; see BENCHMARKS.md.)
func BenchmarkHookAllow(b *testing.B) {
	for _, bc := range benchInputs {
		b.Run(bc.name, func(b *testing.B) {
			w := newWorld(b)
			w.writeConfig("[hook]\nallow = [\"Read\", \"Bash(cd:*)\", \"Bash(ls:*)\", \"Bash(grep:*)\", \"Bash(git status:*)\"]\n")
			in := []byte(strings.ReplaceAll(bc.input, "{{PROJECT}}", w.project))
			var out bytes.Buffer
			for b.Loop() {
				out.Reset()
				code := Run(context.Background(), &Env{Connect: connect, Stdin: bytes.NewReader(in), Stdout: &out, Stderr: io.Discard,
					Getenv: w.getenv, Cwd: w.project, Start: time.Now(), Load: w.load()})
				if code != 0 || !strings.Contains(out.String(), `"allow"`) {
					b.Fatalf("exit %d, %s", code, out.String())
				}
			}
		})
	}
}

// BenchmarkDecide is the policy alone on shell commands.
func BenchmarkDecide(b *testing.B) {
	w := newWorld(b)
	p := w.policy()
	for _, cmd := range []string{"ls -la", "cd src && ls -la | grep main && git status", "rm -rf build"} {
		b.Run(cmd, func(b *testing.B) {
			for b.Loop() {
				w.bash(p, cmd)
			}
		})
	}
}
