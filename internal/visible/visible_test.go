package visible

import (
	"strings"
	"testing"
	"unicode"
)

// TestVisible is the one table of the rule every surface uses: each row is
// a character an agent could hide text with, or one that must stay.
func TestVisible(t *testing.T) {
	tests := []struct {
		name, in   string
		text, line string // String's and Line's result
	}{
		{"plain text stays", "rm -rf build/ → ok", "rm -rf build/ → ok", "rm -rf build/ → ok"},
		{"letters of any script stay", "Grüße 日本 ☃ é", "Grüße 日本 ☃ é", "Grüße 日本 ☃ é"},
		{"combining marks stay", "e\u0301", "e\u0301", "e\u0301"},
		{"no-break space stays", "a\u00a0b", "a\u00a0b", "a\u00a0b"},
		{"tab stays", "a\tb", "a\tb", "a\tb"},
		{"newline: kept, or \\n on one line", "a\nb", "a\nb", `a\nb`},
		{"carriage return", "ls\rrm -rf /", `ls\x0drm -rf /`, `ls\x0drm -rf /`},
		{"escape sequence", "\x1b[2Kok", `\x1b[2Kok`, `\x1b[2Kok`},
		{"NUL, bell, backspace, DEL", "\x00\a\b\x7f", `\x00\x07\x08\x7f`, `\x00\x07\x08\x7f`},
		{"C1 controls: NEL, CSI", "a\u0085b\u009bc", `a\u0085b\u009bc`, `a\u0085b\u009bc`},
		{"soft hyphen", "rm\u00ad -rf", `rm\u00ad -rf`, `rm\u00ad -rf`},
		{"zero-width space", "a\u200bb", `a\u200bb`, `a\u200bb`},
		{"zero-width non-joiner and joiner", "\u200c\u200d", `\u200c\u200d`, `\u200c\u200d`},
		{"word joiner, invisible times", "\u2060\u2062", `\u2060\u2062`, `\u2060\u2062`},
		{"byte order mark", "\ufeffrm", `\ufeffrm`, `\ufeffrm`},
		{"left-to-right and right-to-left marks", "\u200e\u200f", `\u200e\u200f`, `\u200e\u200f`},
		{"Arabic letter mark", "\u061c", `\u061c`, `\u061c`},
		{"embeddings and overrides", "\u202a\u202b\u202c\u202d\u202egnp.exe", `\u202a\u202b\u202c\u202d\u202egnp.exe`, `\u202a\u202b\u202c\u202d\u202egnp.exe`},
		{"isolates", "\u2066\u2067\u2068\u2069", `\u2066\u2067\u2068\u2069`, `\u2066\u2067\u2068\u2069`},
		{"line and paragraph separators", "a\u2028b\u2029c", `a\u2028b\u2029c`, `a\u2028b\u2029c`},
		{"Mongolian vowel separator", "\u180e", `\u180e`, `\u180e`},
		{"interlinear annotation", "\ufff9x\ufffb", `\ufff9x\ufffb`, `\ufff9x\ufffb`},
		{"tag characters", "ok\U000e0001\U000e0041\U000e007f", `ok\U000e0001\U000e0041\U000e007f`, `ok\U000e0001\U000e0041\U000e007f`},
		{"variation selectors", "\u2764\ufe0f a\U000e0100", "\u2764" + `\ufe0f a\U000e0100`, "\u2764" + `\ufe0f a\U000e0100`},
		{"combining grapheme joiner, Hangul filler", "a\u034fb\u3164c", `a\u034fb\u3164c`, `a\u034fb\u3164c`},
		{"invalid UTF-8", "a\xffb", `a\ufffdb`, `a\ufffdb`},
		{"replacement character", "\ufffd", `\ufffd`, `\ufffd`},
		{"a backslash stays as typed", `C:\x1b`, `C:\x1b`, `C:\x1b`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := String(tt.in); got != tt.text {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.text)
			}
			if got := Line(tt.in); got != tt.line {
				t.Errorf("Line(%q) = %q, want %q", tt.in, got, tt.line)
			}
		})
	}
}

// TestVisibleEveryFormatCharacter walks the whole of Unicode: no format
// character, control, separator or variation selector survives either
// function (but the line break and tab each keeps), and every escape is
// plain ASCII.
func TestVisibleEveryFormatCharacter(t *testing.T) {
	hiddenTables := []*unicode.RangeTable{unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Bidi_Control, unicode.Variation_Selector}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue // surrogates are not in UTF-8 text
		}
		if !unicode.In(r, hiddenTables...) || r == '\t' {
			continue
		}
		s := "a" + string(r) + "b"
		if got := String(s); r != '\n' && (strings.ContainsRune(got, r) || got == s) {
			t.Errorf("String kept U+%04X: %q", r, got)
		}
		if got := Line(s); strings.ContainsRune(got, r) {
			t.Errorf("Line kept U+%04X: %q", r, got)
		}
		for _, c := range Line(s) {
			if c < 0x20 || c > 0x7e {
				t.Fatalf("Line(U+%04X) holds %q, not plain ASCII", r, Line(s))
			}
		}
	}
}

// TestControl: the characters a text meant for a human may not hold are
// every control (C0, DEL, C1), every format character and the line and
// paragraph separators, all of them escaped by String too; line breaks
// and tabs pass only in a text of several lines.
func TestControl(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		want := unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
		if Control(r) != want {
			t.Fatalf("Control(%U) = %v, want %v", r, !want, want)
		}
		if want && !Hidden(r) {
			t.Fatalf("%U is refused but not escaped", r)
		}
	}
	for _, tt := range []struct {
		in    string
		lines bool
		at    int
		r     rune
	}{
		{"rm -rf build/ → ok", false, -1, 0},
		{"emoji ❤\ufe0f and Grüße", false, -1, 0},
		{"a\tb", false, 1, '\t'},
		{"a\tb\nc", true, -1, 0},
		{"one\ntwo", false, 3, '\n'},
		{"tier: \x02", false, 6, 2},
		{"ok\r\nnext", true, 2, '\r'},
		{"é\u202egnp.exe", true, 2, 0x202e},
		{"a\u200bb", false, 1, 0x200b},
		{"NEL\u0085", true, 3, 0x85},
		{"x\u2028y", true, 1, 0x2028},
	} {
		if at, r := FindControl(tt.in, tt.lines); at != tt.at || r != tt.r {
			t.Errorf("FindControl(%q, %v) = %d, %U; want %d, %U", tt.in, tt.lines, at, r, tt.at, tt.r)
		}
	}
}
