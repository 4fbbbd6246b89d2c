package bashscope

import (
	"strings"
	"testing"
)

// TestTies: a path is tied to a line only when one of the line's deletes
// names it, as the words of the line say, from the directory it starts
// in; anything the walk cannot follow ties nothing.
func TestTies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		line   string
		cwd    string
		claims []string
		want   bool
	}{
		{"rm -rf build", "/src", []string{"/src/build"}, true},
		{"rm -r build/", "/src", []string{"/src/build"}, true},
		{"rm -r ./build/../build", "/src", []string{"/src/build"}, true},
		{"rm -rf /abs/x", "", []string{"/abs/x"}, true},
		{"rm -rf a b", "/src", []string{"/src/a", "/src/b"}, true},
		{"rm -rf a b", "/src", []string{"/src/b"}, true},
		{"rm -r build/*.o", "/src", []string{"/src/build/x.o", "/src/build/y.o"}, true},
		{"rm -r {a,b}", "/src", []string{"/src/a", "/src/b"}, true},
		{"rm -r 'my dir' my\\ file \"x y\"", "/src", []string{"/src/my dir", "/src/my file", "/src/x y"}, true},
		{"rm -rf -- -x", "/src", []string{"/src/-x"}, true},
		{"unlink f", "/src", []string{"/src/f"}, true},
		{"/bin/rm -r build", "/src", []string{"/src/build"}, true},
		{"find build -name '*.o' -delete", "/src", []string{"/src/build"}, true},
		{"git status; rm -rf dist", "/src", []string{"/src/dist"}, true},
		{"cd sub && rm -rf x", "/src", []string{"/src/sub/x"}, true},
		{"cd /tmp && rm -rf x && cd -P /srv && rm -rf y", "/src", []string{"/srv/y", "/tmp/x"}, true},
		{"(cd sub; rm -rf x); rm -rf y", "/src", []string{"/src/sub/x", "/src/y"}, true},
		{"if true; then rm -rf x; fi", "/src", []string{"/src/x"}, true},
		{"cd sub || exit 1; rm -rf x", "/src", []string{"/src/sub/x"}, true},
		{"rm -r *.o", "/s[rc]", []string{"/s[rc]/a.o"}, true},

		{"ls -la", "/src", []string{"/src/victim"}, false},
		{"echo rm -rf victim", "/src", []string{"/src/victim"}, false},
		{"rm -rf build", "/src", []string{"/src/victim"}, false},
		{"rm -rf build", "/src", []string{"/src/build/sub"}, false},
		{"rm -rf build", "/src", []string{"/src/build/"}, false},
		{"rm -rf build", "/src", []string{"build"}, false},
		{"rm -rf build", "", []string{"/src/build"}, false},
		{"rm -rf build", "src", []string{"/src/build"}, false},
		{"rm -rf build", "/src", nil, false},
		{"rm -rf build; ls -la", "/src", []string{"/src/build", "/src/victim"}, false},
		{"rm -rf 'a b'", "/src", []string{"/src/a"}, false},
		{"rm -rf $X", "/src", []string{"/src/victim"}, false},
		{"rm -rf \"$X\"/victim", "/src", []string{"/src/victim"}, false},
		{"rm -rf ~/x", "/src", []string{"/home/u/x"}, false},
		{"rm -rf $'victim'", "/src", []string{"/src/victim"}, false},
		{"sudo rm -rf victim", "/src", []string{"/src/victim"}, false},
		{"bash -c 'rm -rf victim'", "/src", []string{"/src/victim"}, false},
		{"echo victim | xargs rm -rf", "/src", []string{"/src/victim"}, false},
		{"echo $(rm -rf victim)", "/src", []string{"/src/victim"}, false},
		{"f() { rm -rf victim; }; f", "/src", []string{"/src/victim"}, false},
		{"rm() { :; }; rm -rf victim", "/src", []string{"/src/victim"}, false},
		{"cd $D && rm -rf x", "/src", []string{"/src/x"}, false},
		{"$C sub; rm -rf x", "/src", []string{"/src/x"}, false},
		{"(cd sub); rm -rf x", "/src", []string{"/src/sub/x"}, false},
		{"cd sub || true; rm -rf x", "/src", []string{"/src/sub/x"}, false},
		{"cd sub || true; rm -rf x", "/src", []string{"/src/x"}, false},
		{"cd sub | rm -rf x", "/src", []string{"/src/sub/x"}, false},
		{"if false; then cd sub; fi; rm -rf x", "/src", []string{"/src/x"}, false},
		{"pushd sub; rm -rf x", "/src", []string{"/src/sub/x"}, false},
		{"cd; rm -rf x", "/src", []string{"/src/x"}, false},
		{"CDPATH=/tmp; cd x && rm -rf y", "/src", []string{"/src/x/y"}, false},
		{"trap 'cd /' DEBUG; rm -rf x", "/src", []string{"/src/x"}, false},
		{"eval cd /; rm -rf x", "/src", []string{"/src/x"}, false},
		{"find build -name x", "/src", []string{"/src/build"}, false},
		{"find build -exec echo -delete \\;", "/src", []string{"/src/build"}, false},
		{"rm -rf build/*.o", "/src", []string{"/src/build/sub/x.o"}, false},
		{"rm -r *.o", "/s[rc]", []string{"/sr/a.o"}, false},
		{"rm -rf 'unterminated", "/src", []string{"/src/unterminated"}, false},
	}
	for _, c := range cases {
		if got := Ties(c.line, c.cwd, c.claims); got != c.want {
			t.Errorf("Ties(%q, %q, %q) = %v, want %v", c.line, c.cwd, c.claims, got, c.want)
		}
	}
}

// TestTiesBounds: a line deeper or with more deletes than the walk
// follows ties nothing, and costs little.
func TestTiesBounds(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("( ", maxDepth+1) + "rm -rf x" + strings.Repeat(" )", maxDepth+1)
	if Ties(deep, "/src", []string{"/src/x"}) {
		t.Errorf("a delete nested %d deep is tied", maxDepth+1)
	}
	many := "rm -rf" + strings.Repeat(" a", maxOperands) + " x"
	if Ties(many, "/src", []string{"/src/x"}) {
		t.Errorf("the %d-th operand of a line is tied", maxOperands+1)
	}
	if !Ties("rm -rf"+strings.Repeat(" a", maxOperands-1)+" x", "/src", []string{"/src/x"}) {
		t.Errorf("the %d-th operand of a line is not tied", maxOperands)
	}
}

// TestDeletes: the paths and patterns a line's deletes name, sorted, and
// whether every delete operand could be followed.
func TestDeletes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		line, cwd       string
		paths, patterns []string
		all, ok         bool
	}{
		{"rm -rf b a && ls", "/src", []string{"/src/a", "/src/b"}, nil, true, true},
		{"rm -r build/*.o /etc", "/src", []string{"/etc"}, []string{"/src/build/*.o"}, true, true},
		{"rm -rf build", "", nil, nil, false, true},
		{"rm -rf \"$X\"", "/src", nil, nil, false, true},
		{"find /tmp/x -delete", "/", []string{"/tmp/x"}, nil, true, true},
		{"ls", "/src", nil, nil, true, true},
		{"rm 'unclosed", "/src", nil, nil, false, false},
	}
	for _, c := range cases {
		paths, patterns, all, ok := Deletes(c.line, c.cwd)
		if strings.Join(paths, ",") != strings.Join(c.paths, ",") || strings.Join(patterns, ",") != strings.Join(c.patterns, ",") || all != c.all || ok != c.ok {
			t.Errorf("Deletes(%q, %q) = %q %q %v %v, want %q %q %v %v", c.line, c.cwd, paths, patterns, all, ok, c.paths, c.patterns, c.all, c.ok)
		}
	}
}
