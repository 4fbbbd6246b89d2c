package saferm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/countersign/countersign/client/api"
)

// narrow returns the rm arguments that delete only the targets an
// approver kept when they edited the request before approving it: rm's
// own options, then "--" and the kept targets, each an absolute path of
// this command's assessment a. The kept targets must be a non-empty
// subset of a's, each once, and must resolve to exactly themselves; an
// edit that says otherwise (more targets, others, none, or an answer
// that does not describe the edit) is an error, and nothing is deleted.
func (f *flow) narrow(ctx context.Context, a *Assessment, used *api.Request) ([]string, error) {
	if !used.Edited || used.Original == nil {
		return nil, errors.New("the server's answer does not describe the edit whole")
	}
	var p struct {
		Targets []string `json:"targets"`
	}
	if err := json.Unmarshal(used.Arguments, &p); err != nil {
		return nil, errors.New("the edited request's targets cannot be read")
	}
	if len(p.Targets) == 0 {
		return nil, errors.New("the edit keeps no target")
	}
	kept := make([]string, 0, len(p.Targets))
	for _, t := range a.Targets {
		if slices.Contains(p.Targets, t) {
			kept = append(kept, t)
		}
	}
	for i, t := range p.Targets {
		if !slices.Contains(a.Targets, t) {
			return nil, fmt.Errorf("the edit names %s, which this command does not delete", ShellQuote(oneLine(t)))
		}
		if slices.Contains(p.Targets[:i], t) {
			return nil, fmt.Errorf("the edit names %s twice", ShellQuote(oneLine(t)))
		}
	}
	args := append(rmOptions(f.args), "--")
	args = append(args, kept...)
	// The kept targets, assessed as rm's operands, must be exactly
	// themselves (a path that reads as a pattern would be more).
	b := f.assessor.Assess(ctx, args)
	if b.Blocked || !slices.Equal(b.Targets, kept) {
		return nil, errors.New("the kept targets do not resolve to themselves")
	}
	return args, nil
}

// rmOptions are the options among rm's arguments, in order: every
// argument before "--" that starts with "-", "-" alone (a file) aside.
func rmOptions(args []string) []string {
	var out []string
	for _, a := range args {
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			out = append(out, a)
		}
	}
	return out
}
