package approval_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

// TestCanonicalNumbers: a number keeps its value in the canonical form,
// or the arguments are refused: two calls that differ in a number must not
// share a hash.
func TestCanonicalNumbers(t *testing.T) {
	for raw, want := range map[string]string{
		`{"n":9007199254740992}`:       `{"n":9007199254740992}`,
		`{"n":1.0,"m":1e2,"k":-0}`:     `{"k":0,"m":100,"n":1}`,
		`{"n":0.1,"m":[1.5,-2.25e-3]}`: `{"m":[1.5,-0.00225],"n":0.1}`,
		// Integers of up to 15 digits skip the exact comparison: every
		// one is a double.
		`[999999999999999,-999999999999999,0,-0]`: `[999999999999999,-999999999999999,0,0]`,
	} {
		got, err := approval.Canonical(json.RawMessage(raw))
		if err != nil || string(got) != want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", raw, got, err, want)
		}
	}
	for _, raw := range []string{
		`[1.` + strings.Repeat("0", 500) + `]`, // exact, but longer than any double needs
		`{"n":9007199254740993}`,
		`[-9007199254740993]`,
		`{"pay":{"cents":[1,12345678901234567890]}}`,
		`[0.10000000000000001]`,
	} {
		if _, err := approval.Canonical(json.RawMessage(raw)); !errors.Is(err, approval.ErrInexactNumber) {
			t.Errorf("Canonical(%s): %v, want ErrInexactNumber", raw, err)
		}
	}
}

// TestCreateRefusesInexactNumbers: a request whose arguments hold such a
// number is refused with a message that says what to do.
func TestCreateRefusesInexactNumbers(t *testing.T) {
	e := newEnv(t, approval.Config{})
	_, _, err := e.svc.Create(e.ctx, e.keyA, countersign.CreateInput{Kind: countersign.KindTool, Action: "pay",
		Arguments: json.RawMessage(`{"to":"x","cents":9007199254740993}`)})
	if countersign.ErrorCode(err) != countersign.EINVALID || countersign.ErrorMessage(err) != "arguments: "+approval.ErrInexactNumber.Error() {
		t.Fatalf("Create: %v", err)
	}
}

// TestCreateRefusesNUL: no text of a request holds NUL, which PostgreSQL
// cannot store: the stores agree, and a store copies to the other.
func TestCreateRefusesNUL(t *testing.T) {
	e := newEnv(t, approval.Config{})
	for name, in := range map[string]countersign.CreateInput{
		"action":  {Kind: countersign.KindTool, Action: "rm\x00 -rf /"},
		"preview": {Kind: countersign.KindTool, Action: "x", Preview: "harmless\x00 hidden"},
		"context": {Kind: countersign.KindTool, Action: "x", Context: countersign.RequestContext{Host: "a\x00b"}},
	} {
		if _, _, err := e.svc.Create(e.ctx, e.keyA, in); countersign.ErrorCode(err) != countersign.EINVALID || !strings.Contains(countersign.ErrorMessage(err), "NUL") {
			t.Errorf("%s with NUL: %v, want refused", name, err)
		}
	}
}
