package claudehook

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// maxLinks is how many symlinks one path may pass through, as in Linux.
const maxLinks = 40

// realPath resolves p (absolute) as the kernel will when the call runs:
// every component from the root, symlinks followed where they are met, ".."
// taken after the symlink before it. The first component that does not
// exist ends the resolution, the rest kept as written, since nothing below
// it exists to be a link. So a symlink whose target does not exist yet
// resolves to that target, where a write through it lands. An error
// (permission, a loop, a file used as a directory) means the path cannot be
// known before the call runs.
func realPath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%s is not absolute", p)
	}
	cur, links := "/", 0
	rest := strings.Split(p, "/")
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return filepath.Clean(next + "/" + strings.Join(rest, "/")), nil
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink == 0:
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%s: too many levels of symbolic links", p)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return cur, nil
}

// resolvePath is realPath, or p cleaned when it cannot be resolved (for
// comparisons that only add reasons to ask).
func resolvePath(p string) string {
	if r, err := realPath(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// writePart judges writing the file at path (absolute, or relative to the
// call's working directory) by where the write lands: every symlink on the
// way followed, the last one too. Left to Claude Code inside the project
// directory, asked outside it or where the real path cannot be known.
func (p *Policy) writePart(tool, path string, c *Call) part {
	if !filepath.IsAbs(path) {
		path = c.Cwd + "/" + path
	}
	pt := part{subjects: pathSubjects(tool, path)}
	clean := filepath.Clean(path)
	real, err := realPath(path)
	switch {
	case err != nil:
		pt.raise(Ask, "writes to "+clean+", whose real path cannot be known before it runs: "+err.Error())
	case inside(real, resolvePath(c.Project)):
		pt.def, pt.defWhy = Prompt, []string{"writes inside the project directory"}
	case real != clean:
		pt.def, pt.defWhy = Ask, []string{"writes outside the project directory " + c.Project + ": " + clean + ", which leads to " + real}
	default:
		pt.def, pt.defWhy = Ask, []string{"writes outside the project directory " + c.Project + ": " + clean}
	}
	p.guard(&pt, p.guarded(path, false), c, tool)
	return pt
}

// pathSubjects are the rule subjects of a file tool on path: the real path,
// which every rule matches, and the path as written when it differs, which
// only rules that ask or deny match. So Write(./**) allows no write through
// a link out of the project, and Edit(~/.bashrc) still denies an edit of a
// link to it. A path that cannot be resolved has only its written form.
func pathSubjects(tool, path string) []subject {
	clean := filepath.Clean(path)
	written := subject{tool: tool, kind: argPath, arg: clean, written: true}
	real, err := realPath(path)
	if err != nil {
		return []subject{written}
	}
	out := []subject{{tool: tool, kind: argPath, arg: real}}
	if real != clean {
		out = append(out, written)
	}
	return out
}

// inside reports whether p is dir or lies under it.
func inside(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
