package testutil

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// GoBuild runs goTool build -o out with args in dir ("": the current
// one), with the process's environment plus env, and returns go's output.
//
// A test binary's directory is new on every run, so go build would link
// the binary anew each time: seconds of the processor for a large one.
// GoBuild keeps the last binary of each dir, env and args in the user's
// cache and starts from a copy of it, which go build leaves alone when no
// source, dependency or setting changed (it reads the build ID the binary
// carries; it only updates the file's time) and relinks otherwise. The
// run uses its own copy, which no other run replaces under it; the
// cache's binary is only ever replaced whole, by a rename. Binaries of
// settings no run has used for a week are removed.
func GoBuild(goTool, dir, out string, env []string, args ...string) ([]byte, error) {
	cached := cachedBuild(dir, filepath.Base(out), goTool, env, args)
	var before os.FileInfo
	if cached != "" && copyExec(cached, out) == nil {
		before, _ = os.Stat(out)
	}
	cmd := exec.Command(goTool, append([]string{"build", "-o", out}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return b, err
	}
	after, err := os.Stat(out)
	if err != nil {
		return nil, err
	}
	if cached != "" && (before == nil || !os.SameFile(before, after) || !before.ModTime().Equal(after.ModTime()) || before.Size() != after.Size()) {
		// Best effort: a cache that cannot be written only costs the
		// next run its link.
		var r [8]byte
		rand.Read(r[:])
		tmp := cached + ".new-" + hex.EncodeToString(r[:])
		if copyExec(out, tmp) == nil && os.Rename(tmp, cached) != nil {
			os.Remove(tmp)
		}
	}
	return nil, nil
}

// cachedBuild is where GoBuild keeps the binary for these settings, or ""
// without a user cache.
func cachedBuild(dir, name, goTool string, env, args []string) string {
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	h := sha256.New()
	for _, s := range append(append([]string{goTool, abs}, env...), args...) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	root := filepath.Join(base, "countersign-test-bin")
	d := filepath.Join(root, hex.EncodeToString(h.Sum(nil)[:12]))
	if err := os.MkdirAll(d, 0o700); err != nil {
		return ""
	}
	now := time.Now()
	os.Chtimes(d, now, now)
	pruneBuilds(root, now.Add(-cacheUnused))
	return filepath.Join(d, name)
}

// cacheUnused is how long a kept binary may go unused before it is
// removed: each worktree and setting has binaries of its own.
const cacheUnused = 7 * 24 * time.Hour

// pruneBuilds removes the kept binaries in root last used before cutoff;
// best effort.
func pruneBuilds(root string, cutoff time.Time) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && e.IsDir() && info.ModTime().Before(cutoff) {
			os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}

// copyExec copies the executable src to a new file dst.
func copyExec(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	return out.Close()
}
