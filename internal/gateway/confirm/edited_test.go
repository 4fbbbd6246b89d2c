package confirm

import (
	"encoding/json"
	"testing"

	"github.com/countersign/countersign/internal/approval"
)

// TestApprovedArgs: an approval runs a call only when it is that call's
// (unedited, same binding) or an edit of exactly that call (edited, its
// original that call's, its arguments those its hash binds); then it runs
// the edited arguments. Every other approval is refused.
func TestApprovedArgs(t *testing.T) {
	t.Parallel()
	bind := func(args string) approval.Binding {
		b, err := approval.Bind("write_note", json.RawMessage(args), "")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	call := bind(`{"id":"a","text":"x"}`)
	c := &pendingCall{Tool: "write_note", Binding: call}
	edit := bind(`{"id":"b","text":"y"}`)
	other := bind(`{"id":"z"}`)
	edited := func(mod func(*ticket)) *ticket {
		tk := &ticket{Action: "write_note", ArgsHash: edit.ArgsHash, PreviewHash: edit.PreviewHash, Arguments: edit.Args,
			Edited: true, Original: &originalCall{ArgsHash: call.ArgsHash, PreviewHash: call.PreviewHash}}
		if mod != nil {
			mod(tk)
		}
		return tk
	}
	for _, tc := range []struct {
		name string
		t    *ticket
		want string // the arguments that run; "" for the call's own; "refused"
	}{
		{"the call's own", &ticket{Action: "write_note", ArgsHash: call.ArgsHash, PreviewHash: call.PreviewHash, Arguments: call.Args}, ""},
		{"an edit of the call", edited(nil), string(edit.Args)},
		{"another call's", &ticket{Action: "write_note", ArgsHash: other.ArgsHash, PreviewHash: other.PreviewHash}, "refused"},
		{"another tool's", &ticket{Action: "delete_note", ArgsHash: call.ArgsHash, PreviewHash: call.PreviewHash}, "refused"},
		{"the call's, with another preview", &ticket{Action: "write_note", ArgsHash: call.ArgsHash, PreviewHash: other.PreviewHash}, "refused"},
		{"an edit of another call", edited(func(k *ticket) { k.Original = &originalCall{ArgsHash: other.ArgsHash, PreviewHash: other.PreviewHash} }), "refused"},
		{"an edit of the call's arguments with another preview", edited(func(k *ticket) { k.Original.PreviewHash = other.PreviewHash }), "refused"},
		{"an edit whose arguments are not the ones bound", edited(func(k *ticket) { k.Arguments = other.Args }), "refused"},
		{"an edit to arguments that are not an object", edited(func(k *ticket) { k.Arguments, k.ArgsHash = json.RawMessage(`[1]`), mustHash(t, `[1]`) }), "refused"},
		{"an edit of another tool", edited(func(k *ticket) { k.Action = "delete_note" }), "refused"},
		{"edited without an original", edited(func(k *ticket) { k.Original = nil }), "refused"},
		{"an original without saying edited", edited(func(k *ticket) { k.Edited = false }), "refused"},
		{"an edit whose original is empty", edited(func(k *ticket) { k.Original = &originalCall{} }), "refused"},
		{"an edit that names the edited call as its original", edited(func(k *ticket) {
			k.Original = &originalCall{ArgsHash: edit.ArgsHash, PreviewHash: edit.PreviewHash}
		}), "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, err := approvedArgs(c, tc.t)
			switch {
			case tc.want == "refused" && err != errNotThisCall:
				t.Fatalf("ran %s (err %v), want refused", args, err)
			case tc.want != "refused" && (err != nil || string(args) != tc.want):
				t.Fatalf("args %s, err %v; want %q", args, err, tc.want)
			}
		})
	}
	// A call that is the edited action itself (the model retried with the
	// approver's arguments) runs as it is, and uses the approval.
	asEdited := &pendingCall{Tool: "write_note", Binding: edit}
	if args, err := approvedArgs(asEdited, edited(nil)); err != nil || args != nil {
		t.Fatalf("the edited call itself: args %s, err %v; want its own", args, err)
	}
}

func mustHash(t *testing.T, raw string) string {
	t.Helper()
	h, err := approval.HashArguments(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	return h
}
