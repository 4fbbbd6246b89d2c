package claudehook

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/internal/testutil"
)

// binaries are the commands the tests run, built together into one
// directory, so that countersign-agent finds countersign beside it.
var binaries = []string{"countersign", "countersign-agent"}

// binaryTests are the tests that run them: TestMain starts building when
// one of them is to run, so that the build goes on while other tests do.
var binaryTests = []string{"TestBinary", "TestAgentBinaryHandsOff", "TestApprovalCoversTheWrapper", "TestClaudeCode", "TestGeminiCLI"}

// built holds the binaries, built once for all tests. TestMain removes the
// directory.
var built struct {
	once sync.Once
	dir  string
	err  error
}

// build builds every binary, once; a second caller waits for the first.
// The binaries build at once, each kept between runs by testutil.GoBuild
// so that an unchanged one is not linked again.
func build() {
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "claudehook-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		errs := make([]error, len(binaries))
		var wg sync.WaitGroup
		for i, name := range binaries {
			wg.Go(func() {
				pkg := "github.com/countersign/countersign/cmd/" + name
				if out, err := testutil.GoBuild("go", "", filepath.Join(dir, name), nil, pkg); err != nil {
					errs[i] = &buildError{pkg: pkg, err: err, out: out}
				}
			})
		}
		wg.Wait()
		built.err = errors.Join(errs...)
	})
}

// binary returns the path of cmd/name, built on first use or by TestMain
// beforehand. A test must not change the file: it links or copies it where
// it needs another name or place.
func binary(t testing.TB, name string) string {
	t.Helper()
	build()
	if built.err != nil {
		t.Fatalf("go build %s: %v", strings.Join(binaries, " "), built.err)
	}
	return filepath.Join(built.dir, name)
}

type buildError struct {
	pkg string
	err error
	out []byte
}

func (e *buildError) Error() string { return e.pkg + ": " + e.err.Error() + "\n" + string(e.out) }

// runsBinaries reports whether -run may select a test that runs the
// binaries. It only looks at the pattern's top level; a test it misses
// builds them on first use.
func runsBinaries() bool {
	if testing.Short() {
		return false
	}
	pattern, _, _ := strings.Cut(flag.Lookup("test.run").Value.String(), "/")
	re, err := regexp.Compile(pattern)
	if err != nil {
		return false
	}
	for _, name := range binaryTests {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

func TestMain(m *testing.M) {
	if log := os.Getenv("COUNTERSIGN_TEST_MCP_PEER"); log != "" {
		mcpPeer(log)
		os.Exit(0)
	}
	flag.Parse()
	if runsBinaries() {
		go build()
	}
	code := m.Run()
	built.once.Do(func() {}) // waits for a build under way, or stops one starting
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
