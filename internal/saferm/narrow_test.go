package saferm_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/testutil"
)

// runReal runs the wrapper in process with an exec that runs the real rm
// (as a child, where the wrapper would replace itself with it), so that
// what is deleted is what rm deletes.
func (c *runCase) runReal(args ...string) (execs []execCall) {
	c.t.Helper()
	c.run(args...)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.execs {
		cmd := exec.Command(e.path, e.argv[1:]...)
		cmd.Dir = c.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			c.t.Errorf("the real rm %q: %v: %s", e.argv, err, out)
		}
	}
	return c.execs
}

// exists reports whether a path in the working directory exists.
func (c *runCase) exists(rel string) bool {
	_, err := os.Lstat(filepath.Join(c.dir, rel))
	return err == nil
}

// TestRunEditForged: the wrapper deletes an approver's edit only when
// its targets are a non-empty subset of its own. An answer (forged here
// by a proxy rewriting the consumption) that widens them, swaps one,
// keeps none, or says edited without the original, deletes nothing.
func TestRunEditForged(t *testing.T) {
	s := newRunServer(t)
	target, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	for _, tc := range []struct {
		name    string
		targets func(own []string, outside string) []string
		noOrig  bool
		want    string
	}{
		{"widened", func(own []string, outside string) []string { return append(own, outside) }, false, "which this command does not delete"},
		{"swapped", func(own []string, outside string) []string { return []string{own[0], outside} }, false, "which this command does not delete"},
		{"none", func([]string, string) []string { return []string{} }, false, "keeps no target"},
		{"twice", func(own []string, _ string) []string { return []string{own[0], own[0]} }, false, "twice"},
		{"no original", func(own []string, _ string) []string { return own[:1] }, true, "does not describe the edit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newRunCase(t, nil)
			c.write("proj/a.txt", "x\n")
			c.write("proj/b.txt", "x\n")
			outside := c.write("keep/precious.txt", "x\n")
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasSuffix(r.URL.Path, "/consume") {
					proxy.ServeHTTP(w, r)
					return
				}
				rec := httptest.NewRecorder()
				proxy.ServeHTTP(rec, r)
				var got map[string]any
				if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
					w.WriteHeader(http.StatusBadGateway)
					return
				}
				var p map[string]any
				args, _ := json.Marshal(got["arguments"])
				json.Unmarshal(args, &p)
				var own []string
				for _, t := range p["targets"].([]any) {
					own = append(own, t.(string))
				}
				p["targets"] = tc.targets(own, outside)
				got["original"] = map[string]any{"arguments": got["arguments"], "args_hash": got["args_hash"]}
				if tc.noOrig {
					delete(got, "original")
				}
				got["arguments"], got["edited"] = p, true
				body, _ := json.Marshal(got)
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				w.WriteHeader(rec.Code)
				io.Copy(w, bytes.NewReader(body))
			}))
			defer ts.Close()
			c.vars = map[string]string{"CLAUDECODE": "1", "COUNTERSIGN_URL": ts.URL, "COUNTERSIGN_KEY": s.key}
			decided := s.decideNext(t.Context(), "approve")
			c.runReal("-rf", "proj/a.txt", "proj/b.txt")
			if err := <-decided; err != nil {
				t.Fatal(err)
			}
			c.wantNoExec()
			if !c.exists("proj/a.txt") || !c.exists("proj/b.txt") || !c.exists("keep/precious.txt") {
				t.Errorf("a file is gone after a forged edit")
			}
			if se := c.stderr.String(); !strings.Contains(se, tc.want) || !strings.Contains(se, "nothing was deleted") {
				t.Errorf("stderr does not say %q and that nothing was deleted:\n%s", tc.want, se)
			}
		})
	}
}

// pendingOne waits for the one pending request and returns it, nil
// when none came in time.
func (s *runServer) pendingOne(t *testing.T) *client.Request {
	var r *client.Request
	testutil.Wait(func() bool {
		list, err := s.approver.List(t.Context(), "pending", 10)
		if err == nil && len(list) > 0 {
			r = list[0]
		}
		return r != nil || t.Context().Err() != nil
	}, testutil.EventuallyWithin)
	return r
}
