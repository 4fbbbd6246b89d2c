package server_test

// The seed's signer, in Go, checked against Python, and a real Python
// client written like the seed's.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/testutil"
)

// sdPyJSON serialises v exactly as the seed's clients do:
// json.dumps(v, sort_keys=True, separators=(',', ':')) with Python's default
// ensure_ascii=True. Keys sorted by code point, no whitespace, every
// character outside ' '..'~' escaped as a lowercase \uXXXX (a surrogate pair
// above U+FFFF) except the short escapes \" \\ \n \r \t \b \f, and '/' left
// alone.
func sdPyJSON(v any) []byte {
	var b bytes.Buffer
	sdPyEncode(&b, v)
	return b.Bytes()
}

func sdPyEncode(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case string:
		sdPyString(b, x)
	case []string:
		b.WriteByte('[')
		for i, s := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			sdPyString(b, s)
		}
		b.WriteByte(']')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			sdPyEncode(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // UTF-8 byte order is code point order
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			sdPyString(b, k)
			b.WriteByte(':')
			sdPyEncode(b, x[k])
		}
		b.WriteByte('}')
	default:
		panic(fmt.Sprintf("sdPyEncode: no Python form for %T", v))
	}
}

func sdPyString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r >= 0x20 && r <= 0x7e:
				b.WriteRune(r)
			case r < 0x10000:
				fmt.Fprintf(b, `\u%04x`, r)
			default:
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
			}
		}
	}
	b.WriteByte('"')
}

// sdSign is the seed's signature: hex HMAC-SHA256 of the exact body.
func sdSign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// sdPython returns python3, or skips the test when there is none, unless
// COUNTERSIGN_TEST_STRICT=1 asks for a failure instead.
func sdPython(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		testutil.Missing(t, "python3 is not on PATH: the real seed client is not run")
	}
	return p
}

// sdRunPython runs testdata/seedclient/client.py with the arguments and
// stdin and returns its stdout.
func sdRunPython(t *testing.T, python string, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{filepath.Join("testdata", "seedclient", "client.py")}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python3 client.py %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes()
}

// The Go signer serialises like Python's json.dumps(sort_keys=True,
// separators=(',', ':')), checked against literal Python output and, when
// python3 is there, against Python itself.
func TestSdPythonJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v    any
		want string
	}{
		{map[string]any{"b": 1, "a": "x"}, `{"a":"x","b":1}`},
		{"rm -rf /srv/café/données", `"rm -rf /srv/caf\u00e9/donn\u00e9es"`},
		{"q\"b\\s\n\r\t\b\f\x01\x1f\x7f<>&'/", `"q\"b\\s\n\r\t\b\f\u0001\u001f\u007f<>&'/"`},
		{"\u2028 € — 😀", `"\u2028 \u20ac \u2014 \ud83d\ude00"`},
		{map[string]any{"z": []any{1, "é", nil, true, false, int64(-3)}, "a": map[string]any{"c": []string{}, "b": ""}, "é": 0, "Z": 0},
			`{"Z":0,"a":{"b":"","c":[]},"z":[1,"\u00e9",null,true,false,-3],"\u00e9":0}`},
	}
	for _, c := range cases {
		if got := string(sdPyJSON(c.v)); got != c.want {
			t.Errorf("sdPyJSON(%#v) = %s, want %s", c.v, got, c.want)
		}
	}

	t.Run("python", func(t *testing.T) {
		python := sdPython(t)
		values := make([]any, len(cases))
		for i, c := range cases {
			values[i] = c.v
		}
		in, err := json.Marshal(values)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimRight(string(sdRunPython(t, python, in, "dump")), "\n"), "\n")
		if len(lines) != len(cases) {
			t.Fatalf("python printed %d lines, want %d: %q", len(lines), len(cases), lines)
		}
		for i, c := range cases {
			if got := string(sdPyJSON(c.v)); lines[i] != got {
				t.Errorf("case %d: python %s, Go %s", i, lines[i], got)
			}
		}
	})
}

// A real Python client, written like the seed's, works against the server.
func TestSeedPythonClient(t *testing.T) {
	t.Parallel()
	python := sdPython(t)
	e := sdNew(t)
	const deleteID, eventID = "del_1700000000_4242", "evt_py_1"
	raw := sdRunPython(t, python, nil, e.URL, e.seed, deleteID, eventID)

	type call struct {
		Body      string         `json:"body"`
		Signature string         `json:"signature"`
		Status    int            `json:"status"`
		Answer    map[string]any `json:"answer"`
	}
	var out struct {
		Delete       call `json:"delete"`
		DeleteStatus call `json:"delete_status"`
		Claude       call `json:"claude"`
		ClaudeStatus call `json:"claude_status"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}

	// The Go signer makes the very bytes and signature Python made.
	del := map[string]any{
		"request_id":     deleteID,
		"command":        "rm -rf /srv/café/données",
		"risk_reasons":   []string{"recursive deletion (-r/-R)", "protected path: /srv/café"},
		"affected_paths": []string{"/srv/café/données"},
		"file_count":     47,
		"user":           "déploy",
		"hostname":       "prod-01",
		"cwd":            "/home/deploy",
		"timestamp":      int64(1700000000),
	}
	evt := e.eventPayload(eventID, "session-xyz", "Bash", "rm -rf /tmp/build — \"café\" 😀")
	for _, c := range []struct {
		name    string
		payload map[string]any
		got     call
	}{{"delete", del, out.Delete}, {"claude", evt, out.Claude}} {
		want := sdPyJSON(c.payload)
		if c.got.Body != string(want) {
			t.Errorf("%s: python sent\n%s\nthe Go signer makes\n%s", c.name, c.got.Body, want)
		}
		if c.got.Signature != sdSign(e.seed, []byte(c.got.Body)) {
			t.Errorf("%s: python signed %s, Go %s", c.name, c.got.Signature, sdSign(e.seed, []byte(c.got.Body)))
		}
		if !strings.Contains(c.got.Body, `\u00e9`) || strings.Contains(c.got.Body, "é") || strings.Contains(c.got.Body, `\/`) {
			t.Errorf("%s: body not serialised the seed's way: %s", c.name, c.got.Body)
		}
	}

	if out.Delete.Status != http.StatusCreated {
		t.Fatalf("delete: %d %v", out.Delete.Status, out.Delete.Answer)
	}
	a := out.Delete.Answer
	if a["success"] != true || a["request_id"] != deleteID {
		t.Errorf("delete answer: %v", a)
	}
	if want := e.URL + "/approvals/" + e.stored("delete:"+deleteID).ID; a["approval_url"] != want || a["deny_url"] != nil {
		t.Errorf("delete answer: approval_url %v, deny_url %v; want the inbox page %s and no link", a["approval_url"], a["deny_url"], want)
	}
	if got, want := sdUnix(t, "expires_at", a["expires_at"]), e.Clock.Now().Add(10*time.Minute).Unix(); got != want {
		t.Errorf("expires_at %d, want %d", got, want)
	}
	if out.DeleteStatus.Status != http.StatusOK || !reflect.DeepEqual(out.DeleteStatus.Answer, map[string]any{"status": "pending", "approved_by": nil}) {
		t.Errorf("delete status: %d %v", out.DeleteStatus.Status, out.DeleteStatus.Answer)
	}
	if r := e.stored("delete:" + deleteID); r.Action != "rm -rf /srv/café/données" || r.Context.User != "déploy" || string(r.Seed) != out.Delete.Body {
		t.Errorf("stored delete: %q %q %s", r.Action, r.Context.User, r.Seed)
	}

	if out.Claude.Status != http.StatusCreated {
		t.Fatalf("claude: %d %v", out.Claude.Status, out.Claude.Answer)
	}
	c := out.Claude.Answer
	if c["success"] != true || c["event_id"] != eventID {
		t.Errorf("claude answer: %v", c)
	}
	for _, k := range []string{"approve_url", "deny_url", "respond_url", "auto_approve_url"} {
		if v, ok := c[k]; ok {
			t.Errorf("claude answer: %s = %v, want no link", k, v)
		}
	}
	if out.ClaudeStatus.Status != http.StatusOK || !reflect.DeepEqual(out.ClaudeStatus.Answer, map[string]any{"status": "pending", "response_text": nil, "resolved_by": nil}) {
		t.Errorf("claude status: %d %v", out.ClaudeStatus.Status, out.ClaudeStatus.Answer)
	}
	if r := e.stored("claude:" + eventID); r.Action != "Bash" || r.Context.SessionID != "session-xyz" || !strings.Contains(r.Preview, "rm -rf /tmp/build — \"café\" 😀") {
		t.Errorf("stored event: %q %q %q", r.Action, r.Context.SessionID, r.Preview)
	}

	// The link a human received decides for the Python client.
	sdPage(t, "approve the Python request", e.press(e.link("delete-requests", approval.LinkApprove, deleteID, ""), nil), http.StatusOK)
	e.wantStatus("delete-requests", deleteID, map[string]any{"status": "approved", "approved_by": "admin"})
}
