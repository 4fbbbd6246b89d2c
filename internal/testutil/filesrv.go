package testutil

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	fileServerOnce sync.Once
	fileServerPath string
	fileServerErr  error
	fileServerOut  []byte
)

// FileServer builds, once per test binary, the MCP server of the file
// transfer tests (internal/gateway/testdata/filesrv) and returns its path.
func FileServer(t testing.TB) string {
	t.Helper()
	fileServerOnce.Do(func() {
		_, here, _, _ := runtime.Caller(0)
		src := filepath.Join(filepath.Dir(here), "..", "gateway", "testdata", "filesrv")
		dir, err := tempDir()
		if err != nil {
			fileServerErr = err
			return
		}
		fileServerPath = filepath.Join(dir, "filesrv")
		fileServerOut, fileServerErr = GoBuild("go", src, fileServerPath, nil, ".")
	})
	if fileServerErr != nil {
		t.Fatalf("build the file server: %v\n%s", fileServerErr, fileServerOut)
	}
	return fileServerPath
}

// tempDir is a folder for the built server that outlives single tests;
// the system's temporary folder cleans it up.
func tempDir() (string, error) { return os.MkdirTemp("", "countersign-filesrv-") }
