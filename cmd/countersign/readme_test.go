package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/testutil"
)

// TestReadmeCommands runs the shell blocks of docs/api.md's "Five minutes
// with curl" as written, with bash, curl and sed, against a real server:
// the key and token set-up, the ask, the wait and the consume. A change to
// the API or to the commands that the page does not follow fails here.
// TestReadmeWalkthrough checks the same steps in Go, with their output.
func TestReadmeCommands(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.Missing(t, tool+" is not on PATH: the walk's commands are not run")
		}
	}
	blocks := docBlocks(t, "docs/api.md", "## Five minutes with curl", "sh")
	if len(blocks) != 4 {
		t.Fatalf("the walk-through has %d sh blocks, want 4 (set-up, ask, wait, consume):\n%q", len(blocks), blocks)
	}
	setup, ask, wait, consume := blocks[0], blocks[1], blocks[2], blocks[3]

	// The walk runs ./countersign in the directory that holds the
	// default data directory, ./countersign-data.
	b := newBed(t)
	s := b.serve()
	s.parseFirstStart()
	dir := t.TempDir()
	for link, target := range map[string]string{"countersign": binary, "countersign-data": b.data} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(script string, env ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(b.env(), env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("bash: %v\nscript:\n%s\nstdout: %s\nstderr: %s", err, script, out, stderr.String())
		}
		return string(out)
	}

	// The set-up, then what it set, one per line.
	vars := strings.Split(run(setup+"\nprintf '%s\\n%s\\n%s\\n' \"$KEY\" \"$COUNTERSIGN_TOKEN\" \"$COUNTERSIGN_URL\"\n"), "\n")
	if len(vars) < 3 || !agentKeyRE.MatchString(vars[0]) || !tokenRE.MatchString(vars[1]) || vars[2] != "http://127.0.0.1:8080" {
		t.Fatalf("the set-up block set KEY, COUNTERSIGN_TOKEN and COUNTERSIGN_URL to %q", vars)
	}
	env := []string{"KEY=" + vars[0], "COUNTERSIGN_TOKEN=" + vars[1], "COUNTERSIGN_URL=" + s.URL}

	var asked apiRequest
	out := run(ask, env...)
	if json.Unmarshal([]byte(out), &asked) != nil || asked.Status != "pending" || asked.Key != "laptop" {
		t.Fatalf("the ask block printed %s", out)
	}
	// The server reads the delete's paths from the arguments as the
	// walk sends them: the request's scope holds the path.
	var scoped struct {
		Scope struct {
			Paths []string `json:"paths"`
		} `json:"scope"`
	}
	if json.Unmarshal([]byte(out), &scoped) != nil || strings.Join(scoped.Scope.Paths, " ") != "/var/www/old" {
		t.Fatalf("the asked request's scope holds the paths %q, want /var/www/old: %s", scoped.Scope.Paths, out)
	}
	withID := func(block string) string {
		if !strings.Contains(block, "req_…") {
			t.Fatalf("the block names no request as req_…:\n%s", block)
		}
		return strings.ReplaceAll(block, "req_…", asked.ID)
	}

	waited := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", withID(wait))
		cmd.Dir, cmd.Env = dir, append(b.env(), env...)
		out, _ := cmd.Output()
		waited <- string(out)
	}()
	s.waitWaiters(1)
	b.mustRun(append(b.env(), env...), "approve", asked.Reference)
	var got apiRequest
	if out := testutil.Receive(t, waited, "the wait block's return after the approval"); json.Unmarshal([]byte(out), &got) != nil ||
		got.Status != "approved" || got.ID != asked.ID {
		t.Fatalf("the wait block printed %s, want the request approved", out)
	}

	if out := run(withID(consume), env...); json.Unmarshal([]byte(out), &got) != nil || got.Status != "consumed" {
		t.Fatalf("the consume block printed %s", out)
	}
	var refused apiError
	if out := run(withID(consume), env...); json.Unmarshal([]byte(out), &refused) != nil || refused.Error.Code != "conflict" {
		t.Fatalf("the consume block run again printed %s, want a conflict", out)
	}
}

// docBlocks returns the fenced code blocks of language lang in the section
// that starts with the heading of the page at path, from the module's root.
func docBlocks(t *testing.T, path, heading, lang string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no heading %q", path, heading)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var blocks []string
	for {
		_, rest, ok := strings.Cut(section, "\n```"+lang+"\n")
		if !ok {
			return blocks
		}
		block, after, ok := strings.Cut(rest, "\n```\n")
		if !ok {
			t.Fatalf("a %s block of %q is not closed", lang, heading)
		}
		blocks = append(blocks, block)
		section = "\n" + after
	}
}

// TestReadmeTeams loads the README's teams file as written and resolves it
// against a store that has the account and approvers it names: a rule the
// server would refuse at start fails here.
func TestReadmeTeams(t *testing.T) {
	t.Parallel()
	blocks := docBlocks(t, "README.md", "### A team", "toml")
	if len(blocks) != 1 {
		t.Fatalf("the README's team set-up has %d toml blocks, want 1", len(blocks))
	}
	path := filepath.Join(t.TempDir(), "teams.toml")
	if err := os.WriteFile(path, []byte(blocks[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := approval.LoadTeams(path)
	if err != nil {
		t.Fatalf("the README's teams file: %v", err)
	}
	w := testutil.NewWorld(t) // alice and bob are there already
	w.Account("default")
	for _, name := range []string{"alice", "bob"} {
		if _, err := w.Admin.CreateApprover(w.Ctx, "default", name, "", countersign.RoleApprover); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"carol", "dave", "erin"} {
		w.Approver(name, "default")
	}
	teams, err := f.Resolve(t.Context(), w.Store)
	if err != nil {
		t.Fatalf("the README's teams file against its approvers: %v", err)
	}
	if len(teams.Rules) != 2 || teams.Rules[0].Quorum != 2 || !teams.Rules[0].Separate || !teams.Rules[1].Protected {
		t.Fatalf("the README's rules resolved to %+v", teams.Rules)
	}
}
