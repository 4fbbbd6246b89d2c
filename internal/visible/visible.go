// Package visible shows a text an agent wrote as what it is: every
// character that would display as nothing, move the cursor, erase or
// rewrite a line, or reorder the text around it is written as an escape a
// human can read. Every surface that shows an agent's text to a human (the
// inbox, the one-time link pages, e-mails, ntfy messages, the terminal
// clients and the MCP gateway's local page and previews) goes through it,
// so that what is hidden on one is hidden on none.
//
// The package needs only the standard library, so that the client roles
// (the rm wrapper, the hook, the terminal client) use it without linking
// the server.
package visible

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Hidden reports whether r is shown as an escape. It is the one rule:
//
//   - control characters (Cc: C0, DEL and C1), such as ESC or a carriage
//     return, which a terminal obeys;
//   - format characters (Cf), which display as nothing or change how the
//     text around them displays: the soft hyphen U+00AD, the zero-width
//     space, joiners and word joiner U+200B–U+200D and U+2060, the byte
//     order mark U+FEFF, every bidirectional control (U+061C, U+200E,
//     U+200F, U+202A–U+202E, U+2066–U+2069) and the tag characters of the
//     U+E0000 block;
//   - the line and paragraph separators U+2028 and U+2029, which break a
//     line where nothing shows one;
//   - variation selectors and the other default-ignorable code points
//     (U+034F, the Hangul fillers, U+180B–U+180F, …), which display as
//     nothing and can carry a hidden text;
//   - U+FFFD, which also stands for bytes that are not UTF-8.
//
// Line breaks and tabs are controls too: String keeps "\n" and tabs, Line
// keeps tabs; Hidden says nothing of that.
func Hidden(r rune) bool {
	if r >= 0x20 && r < 0x7f {
		return false // printable ASCII, most of any text, at one comparison
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp,
		unicode.Bidi_Control, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point) ||
		r == utf8.RuneError
}

// Control reports whether r is a control or format character: a C0 or C1
// control or DEL (Cc), a format character (Cf: bidirectional controls,
// zero-width characters, the soft hyphen, tags), or a line or paragraph
// separator. Such a character in a text an agent asks a human to judge
// can erase, rewrite or reorder what the human reads, or make the rules
// that read it see something else; the approval service refuses it (see
// FindControl). The other characters Hidden escapes (variation
// selectors, fillers, U+FFFD) are shown escaped but not refused: they
// occur in honest text, such as emoji.
func Control(r rune) bool {
	if r >= 0x20 && r < 0x7f {
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// FindControl returns the byte offset and the character of the first
// control or format character of s (see Control), or -1. With lines set,
// line breaks ("\n") and tabs are allowed: the text is one of several
// lines, such as a preview.
func FindControl(s string, lines bool) (int, rune) {
	for i, r := range s {
		if lines && (r == '\n' || r == '\t') {
			continue
		}
		if Control(r) {
			return i, r
		}
	}
	return -1, 0
}

// String returns s with every hidden character (see Hidden) escaped, for a
// surface that shows several lines: line breaks ("\n") and tabs stay as
// they are. Escapes are written as Go writes them: \x1b below U+0080,
// \u200b up to U+FFFF, \U000e0041 above; a byte that is not UTF-8 is
// \ufffd.
func String(s string) string { return escape(s, false) }

// Line returns s with every hidden character escaped for a field of one
// line: like String, and a line break too is written \n, so that a value
// cannot add lines of its own (a second "Approve:" line with a link of its
// own, say).
func Line(s string) string { return escape(s, true) }

// escape is String, or Line when oneLine is set.
func escape(s string, oneLine bool) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return mustEscape(r, oneLine) }) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for _, r := range s {
		switch {
		case !mustEscape(r, oneLine):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		default:
			writeEscape(&b, r)
		}
	}
	return b.String()
}

// mustEscape is Hidden, less what a surface keeps: tabs always, line
// breaks when it shows lines.
func mustEscape(r rune, oneLine bool) bool {
	switch r {
	case '\t':
		return false
	case '\n':
		return oneLine
	}
	return Hidden(r)
}

const hex = "0123456789abcdef"

// writeEscape writes r as \xHH, \uHHHH or \UHHHHHHHH.
func writeEscape(b *strings.Builder, r rune) {
	var digits int
	switch {
	case r < 0x80:
		b.WriteString(`\x`)
		digits = 2
	case r <= 0xffff:
		b.WriteString(`\u`)
		digits = 4
	default:
		b.WriteString(`\U`)
		digits = 8
	}
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		b.WriteByte(hex[(r>>shift)&0xf])
	}
}
