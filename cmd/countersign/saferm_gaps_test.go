package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/internal/testutil"
)

// docs/security.md's "What the rm wrapper cannot see", end to end: each form it
// names reaches the real rm without the wrapper asking anybody. The test
// documents the gap, so that it fails the day the page would be wrong;
// inside Claude Code the hook asks about each form (its golden cases
// pre_bash_gap_*).

// srRecorder is a reverse proxy in front of the server that records every
// HTTP request the wrapper makes, whatever its route.
type srRecorder struct {
	URL  string
	mu   sync.Mutex
	seen []string // "METHOD /path"
}

// srRecord starts a recorder in front of the world's server.
func srRecord(t *testing.T, w *srWorld) *srRecorder {
	t.Helper()
	target, err := url.Parse(w.s.URL)
	if err != nil {
		t.Fatal(err)
	}
	rec := &srRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	ts := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.seen = append(rec.seen, r.Method+" "+r.URL.Path)
		rec.mu.Unlock()
		proxy.ServeHTTP(rw, r)
	}))
	t.Cleanup(ts.Close)
	rec.URL = ts.URL
	return rec
}

// take returns the requests recorded so far and forgets them.
func (rec *srRecorder) take() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	seen := rec.seen
	rec.seen = nil
	return seen
}

// srShellEnv is a guarded agent shell's environment: the wrapper's
// directory first in PATH, the server through the recorder, the agent key
// and CLAUDECODE=1.
func srShellEnv(w *srWorld, rec *srRecorder) []string {
	env := slices.DeleteFunc(w.b.env(), func(kv string) bool { return strings.HasPrefix(kv, "PATH=") })
	return append(env,
		"PATH="+filepath.Dir(w.rm)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"COUNTERSIGN_URL="+rec.URL, "COUNTERSIGN_KEY="+w.key, "CLAUDECODE=1")
}

// TestSafeRmGaps: in a guarded shell with the wrapper first in PATH, each
// form the page says passes the wrapper deletes its files without any
// request reaching the server, while the plain `rm -rf tree` in the same
// shell is asked (denied here: nothing is deleted). With guard = "always"
// the marker forms are asked too.
func TestSafeRmGaps(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		testutil.Missing(t, "bash is not on PATH: the shell forms are not run")
		return
	}
	realRm := ""
	for _, p := range []string{"/bin/rm", "/usr/bin/rm"} {
		if _, err := os.Stat(p); err == nil {
			realRm = p
			break
		}
	}
	if realRm == "" {
		testutil.Missing(t, "neither /bin/rm nor /usr/bin/rm exists")
		return
	}
	w := srNewWorld(t)
	rec := srRecord(t, w)
	env := srShellEnv(w, rec)
	sysPath := "/usr/bin:/bin"

	// The control: the plain form in the same shell reaches the wrapper,
	// which asks; the approver denies and nothing is deleted.
	t.Run("plain rm is asked", func(t *testing.T) {
		srWriteTree(t, w.path("tree"), srProject)
		before := srSnapshot(t, w.path("tree"))
		p := w.startProgram(bash, env, "-c", "rm -rf tree")
		r := w.awaitPending(p)
		if r.Kind != "rm" || !slices.Equal(r.Arguments.Targets, []string{w.path("tree")}) {
			t.Errorf("the request is kind %q, targets %q; want rm of [%s]", r.Kind, r.Arguments.Targets, w.path("tree"))
		}
		w.decide(r.ID, "deny", "keep the tree")
		srWant(t, "denied rm -rf tree", p.wait(), 1, "denied by admin: keep the tree; nothing was deleted")
		srSameTree(t, "a denied rm -rf tree", w.path("tree"), before)
		if seen := rec.take(); len(seen) == 0 {
			t.Error("the server saw no request from the plain rm")
		}
		if err := os.RemoveAll(w.path("tree")); err != nil {
			t.Fatal(err)
		}
	})

	flat := map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"}
	for _, tc := range []struct {
		name, line string
		files      map[string]string
	}{
		{"absolute path", realRm + " -rf tree", srProject},
		{"PATH for one command", "PATH=" + sysPath + " rm -rf tree", srProject},
		{"export PATH", "export PATH=" + sysPath + "; rm -rf tree", srProject},
		{"hash -p", "hash -p " + realRm + " rm; rm -rf tree", srProject},
		{"env -u CLAUDECODE", "env -u CLAUDECODE rm -rf tree", srProject},
		{"CLAUDECODE=0", "CLAUDECODE=0 rm -rf tree", srProject},
		{"per-file loop", `cd tree && for f in *; do rm "$f"; done`, flat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srWriteTree(t, w.path("tree"), tc.files)
			requests := len(w.list(""))
			res := w.startProgram(bash, env, "-c", tc.line).wait()
			srWant(t, tc.line, res, 0)
			for rel := range tc.files {
				srGone(t, tc.line, filepath.Join(w.path("tree"), rel))
			}
			if seen := rec.take(); len(seen) != 0 {
				t.Errorf("%s: the wrapper made requests %q; docs/security.md says this form passes it", tc.line, seen)
			}
			if after := len(w.list("")); after != requests {
				t.Errorf("%s: %d requests appeared on the server", tc.line, after-requests)
			}
			if err := os.RemoveAll(w.path("tree")); err != nil {
				t.Fatal(err)
			}
		})
	}

	// What the page says closes the marker forms: guard = "always" in
	// the agent's configuration asks about them too.
	srWriteTree(t, filepath.Join(w.b.home, ".config", "countersign"), map[string]string{"config.toml": "[rm]\nguard = \"always\"\n"})
	for _, line := range []string{"env -u CLAUDECODE rm -rf tree", "CLAUDECODE=0 rm -rf tree"} {
		t.Run("guard always: "+line, func(t *testing.T) {
			srWriteTree(t, w.path("tree"), srProject)
			before := srSnapshot(t, w.path("tree"))
			p := w.startProgram(bash, env, "-c", line)
			r := w.awaitPending(p)
			w.decide(r.ID, "deny", "keep the tree")
			srWant(t, line, p.wait(), 1, "nothing was deleted")
			srSameTree(t, line+" under guard = always", w.path("tree"), before)
			if err := os.RemoveAll(w.path("tree")); err != nil {
				t.Fatal(err)
			}
		})
	}
}
