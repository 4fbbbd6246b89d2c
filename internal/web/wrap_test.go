package web

import "testing"

// TestWrap: a long path or identifier may break after its separators, a
// short word is left whole, and everything is escaped.
func TestWrap(t *testing.T) {
	for in, want := range map[string]string{
		"/tmp/meeting-notes/2026_plan.txt": "/<wbr>tmp/<wbr>meeting-<wbr>notes/<wbr>2026_<wbr>plan.<wbr>txt",
		"rm -r build":                      "rm -r build",
		"a/b c/d":                          "a/b c/d",
		`<b>"x"</b>/aaaaaaaaaaaaaaaaaaaa`:  "&lt;b&gt;&#34;x&#34;&lt;/<wbr>b&gt;/<wbr>aaaaaaaaaaaaaaaaaaaa",
		"":                                 "",
		"é/ü/" + "ééééééééé":               "é/<wbr>ü/<wbr>ééééééééé",
	} {
		if got := string(wrap(in)); got != want {
			t.Errorf("wrap(%q) = %q, want %q", in, got, want)
		}
	}
}
