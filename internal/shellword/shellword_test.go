package shellword

import (
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

func TestLiteral(t *testing.T) {
	cases := []struct {
		src, home, want string
		ok              bool
	}{
		{`plain`, "", "plain", true},
		{`a\ b`, "", "a b", true},
		{`'it''s'`, "", "its", true},
		{`"a\$b\x"`, "", `a$b\x`, true},
		{`"line\` + "\n" + `two"`, "", "linetwo", true},
		{`~`, "/home/u", "/home/u", true},
		{`~/notes.txt`, "/home/u", "/home/u/notes.txt", true},
		{`~/`, "/home/u", "/home/u/", true},
		{`~/x`, "", "", false},
		{`~root/x`, "/home/u", "", false},
		{`$'a\tb'`, "", "", false},
		{`"$HOME"`, "", "", false},
		{`$(pwd)/x`, "", "", false},
		{`a~b`, "", "a~b", true},
	}
	for _, c := range cases {
		f, err := syntax.NewParser().Parse(strings.NewReader("echo "+c.src), "")
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		w := f.Stmts[0].Cmd.(*syntax.CallExpr).Args[1]
		got, ok := Literal(w, c.home)
		if got != c.want || ok != c.ok {
			t.Errorf("Literal(%s, %q) = %q, %v; want %q, %v", c.src, c.home, got, ok, c.want, c.ok)
		}
	}
}
