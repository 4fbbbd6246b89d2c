package confirm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errNotThisCall is an approval that is not for the call that would use
// it: another call's, or an edit of another call.
var errNotThisCall = errors.New("this approval is not for this call")

// approvedArgs checks that the approval t is for the call c, and returns
// the arguments to run it with: nil for the call's own, or the approver's
// edit of them. An approval is for c in exactly three ways: its binding
// is c's and it was not edited; it was edited and its binding, the
// edited action's, is c's; or it says it was edited and the original it
// keeps is c's — then it runs the edited arguments, whose hash must be
// the approval's. Anything else is errNotThisCall, and nothing runs.
func approvedArgs(c *pendingCall, t *ticket) (json.RawMessage, error) {
	if t.Action != c.Tool {
		return nil, errNotThisCall
	}
	switch {
	case !t.Edited && t.Original == nil:
		if !equal(t.ArgsHash, c.ArgsHash) || !equal(t.PreviewHash, c.PreviewHash) {
			return nil, errNotThisCall
		}
		return nil, nil
	case t.Edited && t.Original != nil && equal(t.ArgsHash, c.ArgsHash) && equal(t.PreviewHash, c.PreviewHash):
		// The call is the edited action itself (a model that retried
		// with the arguments the approver chose): it runs as it is.
		return nil, nil
	case t.Edited && t.Original != nil:
		if t.Original.ArgsHash == "" || !equal(t.Original.ArgsHash, c.ArgsHash) || !equal(t.Original.PreviewHash, c.PreviewHash) {
			return nil, errNotThisCall
		}
	default:
		return nil, errNotThisCall // edited, but without its original, or the other way round
	}
	// The edited arguments must be the ones the approval binds, and an
	// object, as a tool's arguments are.
	h, err := approval.HashArguments(t.Arguments)
	if err != nil || !equal(h, t.ArgsHash) || !isObject(t.Arguments) {
		return nil, errNotThisCall
	}
	return t.Arguments, nil
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// forward runs the approved call: with the approver's edit of its
// arguments where there is one, telling the model so, since what ran is
// not what it sent.
func (f *Confirmation) forward(ctx context.Context, a *ask, t *ticket) (*mcp.CallToolResult, error) {
	args, err := approvedArgs(a.c, t)
	if err != nil {
		f.log.Warn("approval refused for another call", "tool", a.name(), "request", t.ID, "principal", a.Principal.ID)
		return refused(err.Error()), nil
	}
	if args == nil {
		return a.Forward(ctx)
	}
	res, err := a.WithArguments(args).Forward(ctx)
	if err != nil || res == nil {
		return res, err
	}
	return editedResult(res, t, args), nil
}

// editedResult adds to the result of an edited call what the model must
// know: a human changed the arguments, and which ones ran.
func editedResult(res *mcp.CallToolResult, t *ticket, args json.RawMessage) *mcp.CallToolResult {
	out := *res
	out.Content = append(append([]mcp.Content{}, res.Content...), &mcp.TextContent{Text: fmt.Sprintf(
		"countersign: a human edited this call before approving it (request %s); it ran with these arguments instead of yours: %s",
		t.Reference, compact(args))})
	meta := mcp.Meta{}
	for k, v := range res.Meta {
		meta[k] = v
	}
	meta["countersign/edited"] = true
	meta["countersign/reference"] = t.Reference
	out.Meta = meta
	return &out
}

// compact is JSON on one line.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// takeEdited uses, for a retry of the call a, the approval of the request
// id (the one last asked for this call) where an approver edited the call
// before approving it: that approval's binding is the edited call's. The
// take finds it by the original call already; a server of an earlier
// version does not, and this finds it by id while the gateway remembers
// the id. It returns false when there is no such approval.
func (f *Confirmation) takeEdited(ctx context.Context, a *ask, id string) (*ticket, bool) {
	t, err := f.approvals.get(ctx, a.Principal, id)
	if err != nil || t.Status != countersign.StatusApproved || !t.Edited {
		return nil, false
	}
	if _, err := approvedArgs(a.c, t); err != nil {
		return nil, false
	}
	used, err := f.approvals.consume(ctx, a.Principal, id)
	if err != nil {
		return nil, false
	}
	return used, true
}
