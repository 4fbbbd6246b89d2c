package claudehook

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// built holds the binaries the tests run, built once for all of them
// into one directory, so that countersign-agent finds countersign beside
// it. TestMain removes the directory.
var built struct {
	sync.Mutex
	dir  string
	errs map[string]error
}

// binary returns the path of cmd/name, built on its first use. A test
// must not change the file: it links or copies it where it needs another
// name or place.
func binary(t *testing.T, name string) string {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	if built.dir == "" {
		dir, err := os.MkdirTemp("", "claudehook-bin-")
		if err != nil {
			t.Fatal(err)
		}
		built.dir, built.errs = dir, map[string]error{}
	}
	bin := filepath.Join(built.dir, name)
	err, done := built.errs[name]
	if !done {
		if out, e := exec.Command("go", "build", "-o", bin, "github.com/countersign/countersign/cmd/"+name).CombinedOutput(); e != nil {
			err = &buildError{err: e, out: out}
		}
		built.errs[name] = err
	}
	if err != nil {
		t.Fatalf("go build %s: %v", name, err)
	}
	return bin
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
