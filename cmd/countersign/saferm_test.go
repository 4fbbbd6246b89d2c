package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testutil"
)

// The rm wrapper end to end: the built binary invoked as rm (through a
// symlink named rm) on real temporary trees, against a real
// `countersign serve`, deciding as an approver through the API. A guarded
// session is one with CLAUDECODE=1 set, as in Claude Code's shells.

// srWorld is one test's world for the wrapper: a bed, a server (unless the
// test needs none), its agent key and an approver token, the symlink named
// rm (to the small countersign-agent binary, as the README installs it),
// and the working directory rm runs in.
type srWorld struct {
	t     *testing.T
	b     *bed
	s     *server // nil for a world without a server
	key   string  // the first start's agent key
	token string  // an approver token of admin
	rm    string  // a symlink named rm to the binary under test
	dir   string  // the working directory, symlinks resolved
}

// srNewWorld starts a server with serveArgs and prepares the world.
func srNewWorld(t *testing.T, serveArgs ...string) *srWorld {
	t.Helper()
	w := srNewOffline(t)
	w.s = w.b.serve(serveArgs...)
	w.key = w.s.parseFirstStart().key
	tok := jsonObject(t, w.b.mustRun(w.b.env(), "token", "create", "--data", w.b.data, "--approver", "admin", "--json"), "id", "token")
	w.token = tok["token"]
	return w
}

// srNewOffline prepares a world without a server: home and working
// directories and the rm symlink.
func srNewOffline(t *testing.T) *srWorld {
	t.Helper()
	b := newBed(t)
	root, err := filepath.EvalSymlinks(filepath.Dir(b.home))
	if err != nil {
		t.Fatal(err)
	}
	b.home = filepath.Join(root, "home")
	w := &srWorld{t: t, b: b, rm: filepath.Join(root, "bin", "rm"), dir: filepath.Join(root, "work")}
	for _, d := range []string{b.home, w.dir, filepath.Dir(w.rm)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(agentBinary, w.rm); err != nil {
		t.Fatal(err)
	}
	return w
}

// env is the environment of the wrapper: the bed's, the server and agent
// key, the agent marker when guarded, and extra.
func (w *srWorld) env(guarded bool, extra ...string) []string {
	var vars []string
	if w.s != nil {
		vars = append(vars, "COUNTERSIGN_URL="+w.s.URL, "COUNTERSIGN_KEY="+w.key)
	}
	if guarded {
		vars = append(vars, "CLAUDECODE=1")
	}
	return w.b.env(append(vars, extra...)...)
}

// path returns the absolute path of rel in the working directory.
func (w *srWorld) path(rel string) string {
	return filepath.Join(w.dir, rel)
}

// srProc is a running rm.
type srProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	args   []string
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{}
	res    result
}

// start starts the rm symlink with args in the working directory.
func (w *srWorld) start(env []string, args ...string) *srProc {
	w.t.Helper()
	return w.startProgram(w.rm, env, args...)
}

// startProgram starts program with args in the working directory: the rm
// symlink, or a shell that runs rm.
func (w *srWorld) startProgram(program string, env []string, args ...string) *srProc {
	w.t.Helper()
	p := &srProc{t: w.t, args: args, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(program, args...)
	p.cmd.Env, p.cmd.Dir = env, w.dir
	p.cmd.Stdin = strings.NewReader("")
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		w.t.Fatalf("start %s %q: %v", filepath.Base(program), args, err)
	}
	go func() {
		err := p.cmd.Wait()
		p.res = result{stdout: p.stdout.String(), stderr: p.stderr.String()}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			p.res.code = exit.ExitCode()
		} else if err != nil {
			p.res.code = -1
			p.res.stderr += "\n(wait: " + err.Error() + ")"
		}
		close(p.done)
	}()
	w.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits (bounded) for rm to end and returns how it ended.
func (p *srProc) wait() result {
	p.t.Helper()
	testutil.ReceiveOr(p.t, p.done, fmt.Sprintf("the end of rm %q", p.args), func() { p.t.Logf("stderr: %s", p.stderr) })
	return p.res
}

// run runs rm to its end.
func (w *srWorld) run(env []string, args ...string) result {
	w.t.Helper()
	return w.start(env, args...).wait()
}

// srRequest is a request as the API shows it, with the rm payload's
// targets.
type srRequest struct {
	apiRequest
	Preview   string `json:"preview"`
	Arguments struct {
		Args    []string `json:"args"`
		Targets []string `json:"targets"`
	} `json:"arguments"`
}

// list returns the requests with the status ("" for all), as the approver
// sees them.
func (w *srWorld) list(status string) []srRequest {
	w.t.Helper()
	code, body := call(w.t, "GET", w.s.URL+"/api/v1/requests?limit=500&status="+status, w.token, "")
	if code != http.StatusOK {
		w.t.Fatalf("list requests: status %d: %s", code, body)
	}
	var out struct {
		Requests []srRequest `json:"requests"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		w.t.Fatalf("list requests: %v: %s", err, body)
	}
	return out.Requests
}

// get returns a request as its agent sees it.
func (w *srWorld) get(id string) srRequest {
	w.t.Helper()
	code, body := call(w.t, "GET", w.s.URL+"/api/v1/requests/"+id, w.key, "")
	var r srRequest
	if code != http.StatusOK || json.Unmarshal(body, &r) != nil {
		w.t.Fatalf("get %s: status %d: %s", id, code, body)
	}
	return r
}

// awaitPending waits until a pending request other than those in skip
// exists, failing if rm ends first.
func (w *srWorld) awaitPending(p *srProc, skip ...string) srRequest {
	w.t.Helper()
	var found *srRequest
	ended := false
	testutil.Wait(func() bool {
		for _, r := range w.list("pending") {
			if !slices.Contains(skip, r.ID) {
				found = &r
				return true
			}
		}
		select {
		case <-p.done:
			ended = true
		default:
		}
		return ended
	}, testutil.EventuallyWithin)
	switch {
	case found != nil:
		return *found
	case ended:
		w.t.Fatalf("rm %q ended (exit %d) before asking\nstderr: %s", p.args, p.res.code, p.res.stderr)
	default:
		w.t.Fatalf("rm %q made no request within %s\nstderr: %s", p.args, testutil.EventuallyWithin, p.stderr)
	}
	return srRequest{}
}

// decide decides a request as the approver.
func (w *srWorld) decide(id, decision, text string) {
	w.t.Helper()
	body, _ := json.Marshal(map[string]string{"decision": decision, "text": text})
	code, data := call(w.t, "POST", w.s.URL+"/api/v1/requests/"+id+"/decision", w.token, string(body))
	if code != http.StatusOK {
		w.t.Fatalf("%s %s: status %d: %s", decision, id, code, data)
	}
}

// srWriteTree creates files (relative path → content) under root.
func srWriteTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// srSnapshot describes the tree at root: relative path → content, "dir"
// or "-> target"; nil when root does not exist.
func srSnapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	if _, err := os.Lstat(root); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "-> " + target
			return err
		case d.IsDir():
			out[rel] = "dir"
		default:
			data, err := os.ReadFile(p)
			out[rel] = string(data)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// srSameTree fails unless the tree at root is still as snapshotted.
func srSameTree(t *testing.T, what, root string, want map[string]string) {
	t.Helper()
	got := srSnapshot(t, root)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s changed %s:\ngot  %v\nwant %v", what, root, got, want)
	}
}

// srGone fails unless nothing is left at path.
func srGone(t *testing.T, what, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: %s still exists (%v)", what, path, err)
	}
}

// srProject is a small tree that any recursive delete must ask about.
var srProject = map[string]string{"README": "read me\n", "src/main.go": "package main\n", "src/util/u.go": "package util\n"}

// srWant checks an ended rm's exit status and that stderr holds every
// fragment.
func srWant(t *testing.T, what string, res result, code int, fragments ...string) {
	t.Helper()
	if res.code != code {
		t.Errorf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", what, res.code, code, res.stdout, res.stderr)
	}
	for _, f := range fragments {
		if !strings.Contains(res.stderr, f) {
			t.Errorf("%s: stderr lacks %q:\n%s", what, f, res.stderr)
		}
	}
}

// TestSafeRmApproved: an approved delete runs the real rm with the
// original arguments — exit 0 and the tree gone — and the approval is used
// up. When the real rm fails after the approval, its exit status is the
// wrapper's.
func TestSafeRmApproved(t *testing.T) {
	t.Parallel()
	w := srNewWorld(t)
	srWriteTree(t, w.path("proj"), srProject)
	p := w.start(w.env(true), "-rf", "proj")
	r := w.awaitPending(p)
	if r.Kind != "rm" || r.Action != "rm -rf proj" || !slices.Equal(r.Arguments.Args, []string{"-rf", "proj"}) ||
		!slices.Equal(r.Arguments.Targets, []string{w.path("proj")}) {
		t.Errorf("the request is %+v, want kind rm, action %q, targets [%s]", r, "rm -rf proj", w.path("proj"))
	}
	// Nothing is deleted while the request waits.
	if srSnapshot(t, w.path("proj")) == nil {
		t.Fatal("proj was deleted before the approval")
	}
	w.decide(r.ID, "approve", "")
	res := p.wait()
	srWant(t, "approved rm -rf proj", res, 0, "waiting for approval of "+r.Reference, r.Reference+" approved by admin")
	srGone(t, "approved rm -rf proj", w.path("proj"))
	if got := w.get(r.ID); got.Status != "consumed" {
		t.Errorf("after the deletion the request is %q, want consumed", got.Status)
	}

	// The real rm's own failure: it removes proj2 but not the missing
	// file, and exits 1; so does the wrapper, with rm's message.
	srWriteTree(t, w.path("proj2"), srProject)
	p = w.start(w.env(true), "-r", "proj2", "no-such-file")
	r = w.awaitPending(p)
	w.decide(r.ID, "approve", "")
	res = p.wait()
	srWant(t, "approved rm -r proj2 no-such-file", res, 1, "no-such-file")
	if strings.Contains(res.stderr, "nothing was deleted") {
		t.Errorf("the wrapper claims nothing was deleted after running rm:\n%s", res.stderr)
	}
	srGone(t, "approved rm -r proj2 no-such-file", w.path("proj2"))
}

// TestSafeRmDenied: a denial exits 1 with the approver's reason and leaves
// every file.
func TestSafeRmDenied(t *testing.T) {
	t.Parallel()
	w := srNewWorld(t)
	srWriteTree(t, w.path("proj"), srProject)
	before := srSnapshot(t, w.path("proj"))
	p := w.start(w.env(true), "-r", "proj")
	r := w.awaitPending(p)
	w.decide(r.ID, "deny", "keep the sources")
	srWant(t, "denied", p.wait(), 1, r.Reference+" denied by admin: keep the sources; nothing was deleted")
	srSameTree(t, "a denied rm", w.path("proj"), before)
	if got := w.get(r.ID); got.Status != "denied" {
		t.Errorf("the request is %q, want denied", got.Status)
	}
}

// TestSafeRmStoppedAndResponded: "stop" ends the wrapper with 130 and a
// message; a response instead of a decision exits 1 with the text. Both
// leave the files.
func TestSafeRmStoppedAndResponded(t *testing.T) {
	t.Parallel()
	w := srNewWorld(t)
	srWriteTree(t, w.path("proj"), srProject)
	before := srSnapshot(t, w.path("proj"))

	p := w.start(w.env(true), "-rf", "proj")
	r := w.awaitPending(p)
	w.decide(r.ID, "stop", "")
	srWant(t, "stopped", p.wait(), 130, r.Reference+": admin stopped this session; nothing was deleted")
	srSameTree(t, "a stopped rm", w.path("proj"), before)

	p = w.start(w.env(true), "-rf", "proj")
	r2 := w.awaitPending(p, r.ID)
	w.decide(r2.ID, "respond", "use git clean instead")
	srWant(t, "responded", p.wait(), 1, r2.Reference+" not approved; admin answered: use git clean instead")
	srSameTree(t, "a responded rm", w.path("proj"), before)
	if got := w.get(r2.ID); got.Status != "responded" {
		t.Errorf("the request is %q, want responded", got.Status)
	}
}

// TestSafeRmExpired: a request nobody decides expires on the server (a TTL
// of 1 s, which only the test build accepts); the wrapper exits 1 and
// deletes nothing.
func TestSafeRmExpired(t *testing.T) {
	t.Parallel()
	w := srNewWorld(t, "--request-ttl", "1s")
	srWriteTree(t, w.path("proj"), srProject)
	before := srSnapshot(t, w.path("proj"))
	p := w.start(w.env(true), "-rf", "proj")
	// The request may expire before a look at the pending list would
	// see it: find it once the wrapper is done.
	res := p.wait()
	expired := w.list("expired")
	if len(expired) != 1 {
		t.Fatalf("%d expired requests, want the wrapper's one\nstderr: %s", len(expired), res.stderr)
	}
	r := expired[0]
	srWant(t, "expired", res, 1, r.Reference+" expired without a decision; nothing was deleted")
	srSameTree(t, "an expired rm", w.path("proj"), before)
	if got := w.get(r.ID); got.Status != "expired" {
		t.Errorf("the request is %q, want expired", got.Status)
	}
}

// TestSafeRmPollTimeout: with poll_timeout = "1s" in the user's config
// file the wrapper gives up after 1 s, exits 1 and withdraws the request.
func TestSafeRmPollTimeout(t *testing.T) {
	t.Parallel()
	w := srNewWorld(t)
	cfg := filepath.Join(w.b.home, ".config", "countersign", "config.toml")
	srWriteTree(t, filepath.Dir(cfg), map[string]string{"config.toml": "poll_timeout = \"1s\"\n"})
	srWriteTree(t, w.path("proj"), srProject)
	before := srSnapshot(t, w.path("proj"))
	start := time.Now()
	p := w.start(w.env(true), "-rf", "proj")
	// The wrapper may withdraw its request before a look at the pending
	// list would see it: find it once the wrapper is done.
	res := p.wait()
	took := time.Since(start)
	cancelled := w.list("cancelled")
	if len(cancelled) != 1 {
		t.Fatalf("%d cancelled requests, want the wrapper's one\nstderr: %s", len(cancelled), res.stderr)
	}
	r := cancelled[0]
	srWant(t, "poll timeout", res, 1, "no decision on "+r.Reference+" in time; nothing was deleted")
	if took < time.Second || took > 15*time.Second {
		t.Errorf("the wrapper gave up after %v, want about 1 s", took)
	}
	srSameTree(t, "a timed-out rm", w.path("proj"), before)
	if got := w.get(r.ID); got.Status != "cancelled" {
		t.Errorf("after the timeout the request is %q, want cancelled", got.Status)
	}
}

// TestSafeRmServerDown: with no server listening the wrapper exits 1 and
// names the server and the setting to fix: the variable, or the config
// file's key.
func TestSafeRmServerDown(t *testing.T) {
	t.Parallel()
	w := srNewOffline(t)
	// A port that was just free: nothing listens on it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	srWriteTree(t, w.path("proj"), srProject)
	before := srSnapshot(t, w.path("proj"))

	res := w.run(w.env(true, "COUNTERSIGN_URL="+url, "COUNTERSIGN_KEY=csk_unused"), "-rf", "proj")
	srWant(t, "server down (environment)", res, 1, "cannot reach the countersign server at "+url, "COUNTERSIGN_URL", "nothing was deleted")

	cfg := filepath.Join(w.b.home, ".config", "countersign", "config.toml")
	srWriteTree(t, filepath.Dir(cfg), map[string]string{"config.toml": fmt.Sprintf("server_url = %q\nagent_key = \"csk_unused\"\n", url)})
	res = w.run(w.env(true), "-rf", "proj")
	srWant(t, "server down (config file)", res, 1, "cannot reach the countersign server at "+url, "server_url in "+cfg, "nothing was deleted")
	srSameTree(t, "rm without a server", w.path("proj"), before)
}

// TestSafeRmHardBlocks: /, ~, ., .., a symlink to /, $HOME (as typed and
// expanded) are refused with exit 1 and no request, with or without -rf.
func TestSafeRmHardBlocks(t *testing.T) {
	t.Parallel()
	w := srNewWorld(t)
	if err := os.Symlink("/", w.path("rootlink")); err != nil {
		t.Fatal(err)
	}
	srWriteTree(t, w.b.home, map[string]string{"notes.txt": "mine\n"})
	homeBefore := srSnapshot(t, w.b.home)
	workBefore := srSnapshot(t, w.dir)
	before := len(w.list(""))
	for _, op := range []string{"/", "~", ".", "..", "rootlink", "$HOME", w.b.home, w.dir} {
		for _, args := range [][]string{{op}, {"-rf", op}} {
			res := w.run(w.env(true), args...)
			srWant(t, fmt.Sprintf("rm %q", args), res, 1, "refused: ", "nothing was deleted")
		}
	}
	if after := len(w.list("")); after != before {
		t.Errorf("hard-blocked deletes made %d requests, want none", after-before)
	}
	srSameTree(t, "hard-blocked deletes", w.b.home, homeBefore)
	srSameTree(t, "hard-blocked deletes", w.dir, workBefore)
}

// TestSafeRmNoRisk: a single small file, not recursive, not protected,
// in a guarded session, is deleted at once without a request.
func TestSafeRmNoRisk(t *testing.T) {
	t.Parallel()
	w := srNewWorld(t)
	srWriteTree(t, w.dir, map[string]string{"scratch.txt": "tmp\n", "keep.txt": "keep\n"})
	before := len(w.list(""))
	res := w.run(w.env(true), "scratch.txt")
	srWant(t, "rm scratch.txt", res, 0)
	if res.stderr != "" || res.stdout != "" {
		t.Errorf("a no-risk rm printed stdout %q, stderr %q", res.stdout, res.stderr)
	}
	srGone(t, "rm scratch.txt", w.path("scratch.txt"))
	if after := len(w.list("")); after != before {
		t.Errorf("a no-risk rm made %d requests, want none", after-before)
	}
	if srSnapshot(t, w.path("keep.txt")) == nil {
		t.Error("rm scratch.txt deleted keep.txt")
	}
}

// TestSafeRmUnguarded: without an agent marker the wrapper passes even a
// recursive forced delete straight to the real rm, without a request.
func TestSafeRmUnguarded(t *testing.T) {
	t.Parallel()
	w := srNewWorld(t)
	srWriteTree(t, w.path("proj"), srProject)
	before := len(w.list(""))
	res := w.run(w.env(false), "-rf", "proj")
	srWant(t, "unguarded rm -rf proj", res, 0)
	srGone(t, "unguarded rm -rf proj", w.path("proj"))
	if after := len(w.list("")); after != before {
		t.Errorf("an unguarded rm made %d requests, want none", after-before)
	}
}

// TestSafeRmDryRun: --dry-run prints the assessment, asks nobody and
// deletes nothing, whatever the verdict.
func TestSafeRmDryRun(t *testing.T) {
	t.Parallel()
	w := srNewWorld(t)
	srWriteTree(t, w.path("proj"), srProject)
	before := srSnapshot(t, w.path("proj"))
	count := len(w.list(""))

	res := w.run(w.env(true), "--dry-run", "-rf", "proj")
	srWant(t, "rm --dry-run -rf proj", res, 0)
	for _, want := range []string{
		"session: guarded (agent marker CLAUDECODE=1 is set)\n",
		"verdict: would ask for approval, then run /",
		"targets (1):\n  " + w.path("proj") + "\n",
		"files: 3\n", "recursive: true\n", "force: true\n",
		"  - recursive deletion (-r/-R)\n", "  - forced deletion (-f)\n",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("--dry-run output lacks %q:\n%s", want, res.stdout)
		}
	}
	res = w.run(w.env(true), "-rf", "/", "--dry-run")
	srWant(t, "rm -rf / --dry-run", res, 0)
	if !strings.Contains(res.stdout, "verdict: would block (exit 1, no request)") {
		t.Errorf("--dry-run of / says:\n%s", res.stdout)
	}
	res = w.run(w.env(false), "--dry-run", "-rf", "proj")
	if !strings.Contains(res.stdout, "verdict: would pass straight to /") || !strings.Contains(res.stdout, "in a guarded session: would ask") {
		t.Errorf("--dry-run unguarded says:\n%s", res.stdout)
	}
	srSameTree(t, "--dry-run", w.path("proj"), before)
	if after := len(w.list("")); after != count {
		t.Errorf("--dry-run made %d requests, want none", after-count)
	}
}

// TestSafeRmChangedTargets: what runs is what was approved. The request
// is for box/link with box a directory; before the approval box is
// replaced by a symlink to another directory, so box/link now resolves
// elsewhere. After the approval is used the wrapper sees the change,
// deletes nothing and asks again for the new target.
func TestSafeRmChangedTargets(t *testing.T) {
	t.Parallel()
	w := srNewWorld(t)
	srWriteTree(t, w.path("box/link"), map[string]string{"a.txt": "a\n"})
	srWriteTree(t, w.path("other/link"), map[string]string{"b.txt": "b\n"})

	p := w.start(w.env(true), "-r", "box/link")
	r1 := w.awaitPending(p)
	if !slices.Equal(r1.Arguments.Targets, []string{w.path("box/link")}) {
		t.Fatalf("the first request's targets are %q, want [%s]", r1.Arguments.Targets, w.path("box/link"))
	}
	// Swap box for a symlink to other while the request waits.
	if err := os.Rename(w.path("box"), w.path("box-old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("other", w.path("box")); err != nil {
		t.Fatal(err)
	}
	oldBefore := srSnapshot(t, w.path("box-old"))
	w.decide(r1.ID, "approve", "")

	r2 := w.awaitPending(p, r1.ID)
	if !slices.Equal(r2.Arguments.Targets, []string{w.path("other/link")}) || r2.Action != "rm -r box/link" {
		t.Errorf("the second request is %q for %q, want rm -r box/link for [%s]", r2.Action, r2.Arguments.Targets, w.path("other/link"))
	}
	if got := w.get(r1.ID); got.Status != "consumed" {
		t.Errorf("the first request is %q, want consumed", got.Status)
	}
	// Nothing was deleted on the stale approval.
	if srSnapshot(t, w.path("other/link")) == nil {
		t.Fatal("other/link was deleted on the approval of box/link")
	}
	w.decide(r2.ID, "approve", "")
	srWant(t, "changed targets", p.wait(), 0, "the targets changed since "+r1.Reference+" was approved; asking again")
	srGone(t, "the second approval", w.path("other/link"))
	srSameTree(t, "the second approval", w.path("box-old"), oldBefore)
	if got := w.get(r2.ID); got.Status != "consumed" {
		t.Errorf("the second request is %q, want consumed", got.Status)
	}
	if n := len(w.list("")); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// TestSafeRmTreeGrew: the targets are the same after the approval, but
// hold more than the human approved (files added while the request
// waited): the wrapper deletes nothing on that approval and asks again,
// with the new count.
func TestSafeRmTreeGrew(t *testing.T) {
	t.Parallel()
	w := srNewWorld(t)
	srWriteTree(t, w.path("cache"), map[string]string{"a.txt": "a\n"})

	p := w.start(w.env(true), "-rf", "cache")
	r1 := w.awaitPending(p)
	more := map[string]string{}
	for i := range 150 {
		more[fmt.Sprintf("f%03d.txt", i)] = "x\n"
	}
	srWriteTree(t, w.path("cache/more"), more)
	w.decide(r1.ID, "approve", "")

	r2 := w.awaitPending(p, r1.ID)
	if srSnapshot(t, w.path("cache")) == nil {
		t.Fatal("cache was deleted on the approval of its one file")
	}
	if r1.Preview == r2.Preview || !strings.Contains(r2.Preview, "151 files") {
		t.Errorf("the second request's preview does not show the new tree:\n%s", r2.Preview)
	}
	w.decide(r2.ID, "approve", "")
	srWant(t, "tree grew", p.wait(), 0, "what the targets hold grew since "+r1.Reference+" was approved; asking again")
	srGone(t, "the second approval", w.path("cache"))
}

// TestSafeRmCtrlC: SIGINT while the wrapper waits cancels the request on
// the server and exits 130, deleting nothing.
func TestSafeRmCtrlC(t *testing.T) {
	t.Parallel()
	w := srNewWorld(t)
	srWriteTree(t, w.path("proj"), srProject)
	before := srSnapshot(t, w.path("proj"))
	p := w.start(w.env(true), "-rf", "proj")
	r := w.awaitPending(p)
	w.s.waitWaiters(1) // the wrapper is in its long poll
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	srWant(t, "Ctrl-C", p.wait(), 130, "interrupted: "+r.Reference+" cancelled; nothing was deleted")
	if got := w.get(r.ID); got.Status != "cancelled" {
		t.Errorf("after Ctrl-C the request is %q, want cancelled", got.Status)
	}
	srSameTree(t, "an interrupted rm", w.path("proj"), before)
	// A decision now comes too late: nothing changes.
	code, _ := call(t, "POST", w.s.URL+"/api/v1/requests/"+r.ID+"/decision", w.token, `{"decision":"approve"}`)
	if code == http.StatusOK {
		t.Errorf("approving a cancelled request answered 200")
	}
	srSameTree(t, "an interrupted rm", w.path("proj"), before)
}
