package saferm

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// sample is an assessment of `rm -rf /var/www/data /var/www/old /var/www/my data`.
func sample() *Assessment {
	return &Assessment{
		Reasons:   []string{"recursive deletion (-r/-R)", "protected path: /var/www"},
		Targets:   []string{"/var/www/data", "/var/www/old", "/var/www/my data"},
		Missing:   []string{"/var/www/old"},
		FileCount: 47, Bytes: 1_234_567,
		Recursive: true, Force: true, NeedsApproval: true,
	}
}

var sampleContext = RequestContext{
	User: "deploy", Hostname: "prod-01", Cwd: "/home/deploy", PID: 12345,
	Now: time.Unix(1700000000, 0),
}

func TestBuildPayloadFields(t *testing.T) {
	args := []string{"-rf", "/var/www/data", "/var/www/old", "/var/www/my data"}
	p := BuildPayload(sample(), args, sampleContext)
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{
		"affected_paths", "args", "bytes", "command", "cwd", "file_count", "file_count_capped",
		"force", "hostname", "missing", "preview", "recursive", "request_id", "risk_reasons",
		"targets", "timestamp", "user",
	}
	if !slices.Equal(keys, want) {
		t.Errorf("JSON keys = %q, want %q", keys, want)
	}
	// The seed's fields, with the seed's example values.
	for k, v := range map[string]any{
		"request_id": "del_1700000000_12345", "command": "rm -rf /var/www/data /var/www/old '/var/www/my data'",
		"file_count": 47.0, "user": "deploy", "hostname": "prod-01", "cwd": "/home/deploy", "timestamp": 1700000000.0,
	} {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if got := fmt.Sprint(m["risk_reasons"]); got != "[recursive deletion (-r/-R) protected path: /var/www]" {
		t.Errorf("risk_reasons = %s", got)
	}
}

func TestBuildPayloadLimits(t *testing.T) {
	a := &Assessment{}
	for i := range 60 {
		a.Targets = append(a.Targets, fmt.Sprintf("/tmp/f%02d", i))
	}
	p := BuildPayload(a, []string{"/tmp/f*"}, sampleContext)
	if len(p.AffectedPaths) != 50 || len(p.Targets) != 60 {
		t.Errorf("affected_paths %d, targets %d; want 50 and 60", len(p.AffectedPaths), len(p.Targets))
	}
	if !strings.Contains(p.Preview, "  … and 40 more\n") {
		t.Errorf("preview does not cut the target list:\n%s", p.Preview)
	}
	raw, _ := json.Marshal(BuildPayload(&Assessment{}, nil, sampleContext))
	for _, k := range []string{`"risk_reasons":[]`, `"affected_paths":[]`, `"targets":[]`, `"args":[]`} {
		if !strings.Contains(string(raw), k) {
			t.Errorf("empty payload lacks %s: %s", k, raw)
		}
	}
}

func TestPreview(t *testing.T) {
	args := []string{"-rf", "/var/www/data", "/var/www/old", "/var/www/my data"}
	got := Preview(sample(), args, sampleContext)
	want := `Delete 3 paths recursively (47 files, 1.2 MB) on prod-01 as deploy

Targets:
  /var/www/data
  /var/www/old (does not exist)
  '/var/www/my data'
Why it asks:
  - recursive deletion (-r/-R)
  - protected path: /var/www
In: /home/deploy
Command: rm -rf /var/www/data /var/www/old '/var/www/my data'`
	if got != want {
		t.Errorf("Preview =\n%s\nwant\n%s", got, want)
	}
}

func TestHeadline(t *testing.T) {
	tests := []struct {
		a    Assessment
		rc   RequestContext
		want string
	}{
		{Assessment{Targets: []string{"/tmp/a"}, FileCount: 1, Bytes: 12}, RequestContext{}, "Delete /tmp/a (1 file, 12 B)"},
		{Assessment{Targets: []string{"/srv/x\ny"}, Recursive: true, FileCount: 1000, FileCountCapped: true, Bytes: 5_000_000_000},
			RequestContext{Hostname: "h"}, `Delete $'/srv/x\ny' recursively (at least 1000 files, 5.0 GB) on h`},
	}
	for _, tt := range tests {
		if got := Headline(&tt.a, tt.rc); got != tt.want {
			t.Errorf("Headline = %q, want %q", got, tt.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {999, "999 B"}, {1000, "1.0 kB"}, {1_234_567, "1.2 MB"},
		{999_999, "1.0 MB"}, {100 << 20, "104.9 MB"}, {3 << 40, "3.3 TB"},
	}
	for _, tt := range tests {
		if got := FormatBytes(tt.n); got != tt.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestCurrentContext(t *testing.T) {
	rc := CurrentContext("/x")
	if rc.Cwd != "/x" || rc.PID == 0 || rc.Now.IsZero() || rc.User == "" {
		t.Errorf("CurrentContext = %+v", rc)
	}
}

// TestHookApprovalAgent: the wrapper takes the coding agent the hook
// names with its approval and session, so that its request falls in that
// agent's sessions; an agent it does not know drops the session and the
// approval, which then cover nothing.
func TestHookApprovalAgent(t *testing.T) {
	const id = "req_0123456789abcdef"
	for _, tt := range []struct {
		agent                          string
		wantID, wantSession, wantAgent string
	}{
		{"", id, "s1", ""},
		{"claude-code", id, "s1", "claude-code"},
		{"codex", id, "s1", "codex"},
		{"Codex", "", "", ""},
		{"cursor", "", "", ""},
	} {
		env := map[string]string{EnvApproval: id, EnvSession: "s1", EnvAgent: tt.agent}
		gotID, gotSession, gotAgent := hookApproval(func(k string) string { return env[k] })
		if gotID != tt.wantID || gotSession != tt.wantSession || gotAgent != tt.wantAgent {
			t.Errorf("agent %q: %q %q %q, want %q %q %q", tt.agent, gotID, gotSession, gotAgent, tt.wantID, tt.wantSession, tt.wantAgent)
		}
	}
}
