package approval_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

func TestHashArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b  string
		equal bool
	}{
		{`{"b":1,"a":2}`, `{"a":2,"b":1.0}`, true},
		{`{"a":100}`, `{"a":1e2}`, true},
		{`{ "a" : [1, 2] }`, `{"a":[1,2]}`, true},
		{``, `{}`, true},
		{`{"a":"\u0041"}`, `{"a":"A"}`, true},
		{`{"b":1,"a":2}`, `{"a":2,"b":2}`, false},
		{`{"a":1}`, `{"a":"1"}`, false},
		{`{"a":[1,2]}`, `{"a":[2,1]}`, false},
		{`{"a":null}`, `{}`, false},
	}
	for _, tt := range tests {
		ha, err := approval.HashArguments(json.RawMessage(tt.a))
		if err != nil {
			t.Fatalf("HashArguments(%s): %v", tt.a, err)
		}
		hb, err := approval.HashArguments(json.RawMessage(tt.b))
		if err != nil {
			t.Fatalf("HashArguments(%s): %v", tt.b, err)
		}
		if (ha == hb) != tt.equal {
			t.Errorf("hash(%s) == hash(%s) is %v, want %v", tt.a, tt.b, ha == hb, tt.equal)
		}
	}
	if _, err := approval.HashArguments(json.RawMessage(`{"a":`)); err == nil {
		t.Error("HashArguments of broken JSON: no error")
	}
}

func TestCreateBinding(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	in := countersign.CreateInput{Kind: countersign.KindTool, Action: "Bash", Arguments: json.RawMessage(`{"b":1,"a":2}`), Preview: "run ls"}
	r := e.create(e.keyA, in)

	if string(r.Arguments) != `{"a":2,"b":1}` {
		t.Errorf("arguments = %s, want the canonical {\"a\":2,\"b\":1}", r.Arguments)
	}
	if r.ArgsHash != sha(`{"a":2,"b":1}`) || r.PreviewHash != sha("run ls") {
		t.Errorf("hashes = %s, %s; want SHA-256 of canonical arguments and of preview", r.ArgsHash, r.PreviewHash)
	}
	if r.Status != countersign.StatusPending || !r.CreatedAt.Equal(start) || !r.ExpiresAt.Equal(start.Add(10*time.Minute)) {
		t.Errorf("new request = %s created %v expires %v", r.Status, r.CreatedAt, r.ExpiresAt)
	}
	if _, ok := countersign.ParseReference(r.Reference); !ok || !strings.HasPrefix(r.ID, "req_") {
		t.Errorf("id %q, reference %q", r.ID, r.Reference)
	}
	if got := e.events(r.ID); len(got) != 1 || got[0] != "created" {
		t.Errorf("audit events = %v, want [created]", got)
	}

	// The same call written differently is the same binding.
	in.Arguments = json.RawMessage(`{"a":2,"b":1.0}`)
	same, created, err := e.svc.Create(e.ctx, e.keyA, in)
	if err != nil || created || same.ID != r.ID {
		t.Errorf("reordered arguments: created=%v err=%v id=%v, want the first request", created, err, same)
	}
	// Different values, or a different preview, are another binding.
	in.Arguments = json.RawMessage(`{"a":2,"b":2}`)
	other := e.create(e.keyA, in)
	if other.ArgsHash == r.ArgsHash || other.PreviewHash != r.PreviewHash {
		t.Errorf("different values: args hash %s (first %s)", other.ArgsHash, r.ArgsHash)
	}
	in.Arguments, in.Preview = json.RawMessage(`{"b":1,"a":2}`), "run ls -la"
	if p := e.create(e.keyA, in); p.PreviewHash == r.PreviewHash || p.ArgsHash != r.ArgsHash {
		t.Errorf("different preview: preview hash %s (first %s)", p.PreviewHash, r.PreviewHash)
	}
}

func TestCreateDefaultPreview(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindMCP, Action: "send_mail", Arguments: json.RawMessage(`{"to":"x@example.com"}`)})
	want := "send_mail\n{\n  \"to\": \"x@example.com\"\n}"
	if r.Preview != want || r.PreviewHash != sha(want) {
		t.Errorf("preview = %q, want %q", r.Preview, want)
	}
	// The arguments read as sent: no \u escapes for < > &, numbers as
	// canonicalised.
	h := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindTool, Action: "Bash", Arguments: json.RawMessage(`{"command":"a && b <c>","n":1.50}`)})
	if want := "Bash\n{\n  \"command\": \"a && b <c>\",\n  \"n\": 1.5\n}"; h.Preview != want {
		t.Errorf("preview = %q, want %q", h.Preview, want)
	}
	g := e.create(e.keyA, countersign.CreateInput{Action: "deploy"})
	if g.Kind != countersign.KindGeneric || g.Preview != "deploy" || string(g.Arguments) != "{}" {
		t.Errorf("bare request: kind %s preview %q arguments %s", g.Kind, g.Preview, g.Arguments)
	}
}

func TestCreateIdenticalRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	in := e.toolCall("Bash", "s1")
	r := e.create(e.keyA, in)

	again, created, err := e.svc.Create(e.ctx, e.keyA, in)
	if err != nil || created || again.ID != r.ID || again.Reference != r.Reference {
		t.Fatalf("same key again: created=%v err=%v, want request %s", created, err, r.ID)
	}
	if got := e.events(r.ID); len(got) != 1 {
		t.Errorf("audit events = %v, want one created", got)
	}
	// Another key of the same account never gets the first key's request.
	b, created, err := e.svc.Create(e.ctx, e.keyB, in)
	if err != nil || !created || b.ID == r.ID || b.KeyID != e.keyB.KeyID {
		t.Errorf("other key: created=%v err=%v id=%v", created, err, b)
	}
}

func TestCreateInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	long := strings.Repeat("x", 5000)
	tests := []struct {
		name string
		in   countersign.CreateInput
	}{
		{"unknown kind", countersign.CreateInput{Kind: "shell", Action: "ls"}},
		{"no action", countersign.CreateInput{Kind: countersign.KindTool}},
		{"blank action", countersign.CreateInput{Action: "  \t"}},
		{"long action", countersign.CreateInput{Action: long}},
		{"broken arguments", countersign.CreateInput{Action: "x", Arguments: json.RawMessage(`{"a":`)}},
		{"ttl too short", countersign.CreateInput{Action: "x", TTL: 5 * time.Second}},
		{"ttl too long", countersign.CreateInput{Action: "x", TTL: 2 * time.Hour}},
		{"negative ttl", countersign.CreateInput{Action: "x", TTL: -time.Minute}},
		{"not UTF-8", countersign.CreateInput{Action: "x\xff"}},
		{"long session", countersign.CreateInput{Action: "x", Context: countersign.RequestContext{SessionID: long}}},
		{"empty risk reason", countersign.CreateInput{Action: "x", RiskReasons: []string{""}}},
	}
	before := e.auditCount()
	for _, tt := range tests {
		_, _, err := e.svc.Create(e.ctx, e.keyA, tt.in)
		wantCode(t, tt.name, err, countersign.EINVALID)
	}
	if got := e.auditCount(); got != before {
		t.Errorf("audit log grew from %d to %d on refused requests", before, got)
	}
}

// TestCreateRefusesHiddenText: a text of a request that a human reads
// (action, preview, each risk reason, the context, covered_by, a seed id)
// holding a control or format character is refused with a clear error,
// and nothing is stored, whoever calls (the gateway calls the service in
// process); a preview keeps its line breaks and tabs, and honest text
// (accents, emoji with their variation selectors) passes. The typed facts
// are checked too.
func TestCreateRefusesHiddenText(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	base := func(change func(in *countersign.CreateInput)) countersign.CreateInput {
		in := countersign.CreateInput{Kind: countersign.KindMCP, Action: "write_file", Arguments: json.RawMessage(`{"path":"/srv/a"}`),
			Preview: "write /srv/a", Tier: countersign.TierCommit, RiskReasons: []string{"tier: commit"}}
		change(&in)
		return in
	}
	for _, tt := range []struct {
		name, field string
		in          countersign.CreateInput
	}{
		{"the gateway's old tier reason", "each risk reason", base(func(in *countersign.CreateInput) { in.RiskReasons = []string{"tier: \x02"} })},
		{"a C1 control in a reason", "each risk reason", base(func(in *countersign.CreateInput) { in.RiskReasons = []string{"ok\u0085"} })},
		{"a line break in a reason", "each risk reason", base(func(in *countersign.CreateInput) { in.RiskReasons = []string{"a\nb"} })},
		{"an escape in the action", "action", base(func(in *countersign.CreateInput) { in.Action = "write\x1b[2K_file" })},
		{"a tab in the action", "action", base(func(in *countersign.CreateInput) { in.Action = "write\tfile" })},
		{"a bidi override in the action", "action", base(func(in *countersign.CreateInput) { in.Action = "\u202eelif_etirw" })},
		{"a carriage return in the preview", "preview", base(func(in *countersign.CreateInput) { in.Preview = "ls\rrm -rf /" })},
		{"a zero-width space in the preview", "preview", base(func(in *countersign.CreateInput) { in.Preview = "rm -rf /s\u200brv" })},
		{"a bidi isolate in the preview", "preview", base(func(in *countersign.CreateInput) { in.Preview = "a\u2066b" })},
		{"DEL in the preview", "preview", base(func(in *countersign.CreateInput) { in.Preview = "a\x7fb" })},
		{"a line separator in the preview", "preview", base(func(in *countersign.CreateInput) { in.Preview = "a\u2028b" })},
		{"a format character in the cwd", "context.cwd", base(func(in *countersign.CreateInput) { in.Context.Cwd = "/srv/\u200d" })},
		{"an escape in the host", "context.host", base(func(in *countersign.CreateInput) { in.Context.Host = "box\x1b]0;x\x07" })},
		{"a line break in the user", "context.user", base(func(in *countersign.CreateInput) { in.Context.User = "ada\nroot" })},
		{"a soft hyphen in the session", "context.session_id", base(func(in *countersign.CreateInput) { in.Context.SessionID = "s\u00ad1" })},
		{"a control in covered_by", "covered_by", base(func(in *countersign.CreateInput) {
			in.Kind, in.Tier, in.RiskReasons, in.CoveredBy = countersign.KindRm, "", nil, "req_\x01"
		})},
		{"a control in the seed id", "seed id", base(func(in *countersign.CreateInput) { in.SeedID = "delete:\x0b" })},
		{"an unknown tier", "tier", base(func(in *countersign.CreateInput) { in.Tier = "\x02" })},
		{"a tier word of no tier", "tier", base(func(in *countersign.CreateInput) { in.Tier = "dangerous" })},
		{"a tier on another kind", "tier", base(func(in *countersign.CreateInput) { in.Kind = countersign.KindTool })},
		{"a tier reason above the tier", "each risk reason", base(func(in *countersign.CreateInput) { in.Tier = countersign.TierRead })},
		{"a tier reason below the tier", "each risk reason", base(func(in *countersign.CreateInput) { in.RiskReasons = []string{"tier: read"} })},
		{"a tier reason without a tier", "each risk reason", base(func(in *countersign.CreateInput) { in.Tier = "" })},
		{"a tier reason on another kind", "each risk reason", base(func(in *countersign.CreateInput) { in.Kind, in.Tier = countersign.KindTool, "" })},
	} {
		before := e.auditCount()
		_, _, err := e.svc.Create(e.ctx, e.keyA, tt.in)
		wantCode(t, tt.name, err, countersign.EINVALID)
		if msg := countersign.ErrorMessage(err); !strings.HasPrefix(msg, tt.field+" ") {
			t.Errorf("%s: the error %q does not name %s", tt.name, msg, tt.field)
		}
		if got := e.auditCount(); got != before {
			t.Errorf("%s: a refused request was stored (audit log %d → %d)", tt.name, before, got)
		}
	}
	list, err := e.svc.List(e.ctx, e.alice, countersign.RequestFilter{})
	if err != nil || len(list) != 0 {
		t.Fatalf("after the refusals the inbox holds %d requests (%v), want none", len(list), err)
	}

	// What is honest passes: a preview of several lines with tabs, accents,
	// emoji and their variation selectors, escapes written as text.
	ok := base(func(in *countersign.CreateInput) {
		in.Preview = "Tool:\twrite_file\nContent: Grüße ❤\ufe0f \\x1b as text\n"
		in.RiskReasons = []string{approval.TierReason(countersign.TierCommit)}
	})
	r := e.create(e.keyA, ok)
	if r.Tier != countersign.TierCommit || r.Preview != ok.Preview || r.RiskReasons[0] != "tier: commit" {
		t.Fatalf("stored %q %q %q", r.Tier, r.Preview, r.RiskReasons)
	}
	// A default preview escapes what canonical JSON keeps in strings.
	d := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindGeneric, Action: "deploy", Arguments: json.RawMessage(`{"note":"a\u202eb"}`)})
	if !strings.Contains(d.Preview, `a\u202eb`) {
		t.Errorf("the default preview %q does not escape U+202E", d.Preview)
	}
}

func TestPendingLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	var first *countersign.Request
	for i := range 5 {
		r := e.create(e.keyA, e.toolCall("Bash", ""))
		if i == 0 {
			first = r
		}
	}
	before := e.auditCount()

	_, _, err := e.svc.Create(e.ctx, e.keyA, e.toolCall("Bash", ""))
	wantCode(t, "6th request", err, countersign.ELIMIT)
	if ae := asError(err); ae == nil || ae.RetryAfter != 10*time.Minute {
		t.Errorf("6th request: %#v, want RetryAfter of 10m (when the oldest expires)", ae)
	}
	// The limit is the account's: the other key of acme is limited too.
	_, _, err = e.svc.Create(e.ctx, e.keyB, e.toolCall("Bash", ""))
	wantCode(t, "other key of the full account", err, countersign.ELIMIT)
	if got := e.auditCount(); got != before {
		t.Errorf("audit log grew from %d to %d on limited requests", before, got)
	}
	// Asking again for what is already waiting is not a new request.
	again, created, err := e.svc.Create(e.ctx, e.keyA, countersign.CreateInput{Kind: first.Kind, Action: first.Action, Arguments: first.Arguments})
	if err != nil || created || again.ID != first.ID {
		t.Errorf("identical request at the limit: created=%v err=%v", created, err)
	}
	// Another account is not affected.
	e.create(e.keyX, e.toolCall("Bash", ""))

	// Cancelling one frees room.
	if _, err := e.svc.Cancel(e.ctx, e.keyA, first.ID); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	e.create(e.keyB, e.toolCall("Bash", ""))
	_, _, err = e.svc.Create(e.ctx, e.keyA, e.toolCall("Bash", ""))
	wantCode(t, "full again", err, countersign.ELIMIT)
}

func TestPendingLimitConfigured(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{MaxPending: 2})
	e.pending()
	e.pending()
	_, _, err := e.svc.Create(e.ctx, e.keyA, e.toolCall("Bash", ""))
	wantCode(t, "3rd request with MaxPending 2", err, countersign.ELIMIT)
	// Expired requests no longer count.
	e.clock.Advance(10 * time.Minute)
	e.pending()
}
