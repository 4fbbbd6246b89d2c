package saferm_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/client/api"
)

// TestRunNarrowed: an approver who keeps fewer of an rm's targets (an
// edit through the API, with their token) gets exactly those deleted by
// the real rm; the others stay.
func TestRunNarrowed(t *testing.T) {
	s := newRunServer(t)
	c := newRunCase(t, map[string]string{"CLAUDECODE": "1", "COUNTERSIGN_URL": s.URL, "COUNTERSIGN_KEY": s.key})
	for _, f := range []string{"proj/a/1.txt", "proj/b/2.txt", "proj/c/3.txt"} {
		c.write(f, "x\n")
	}
	keep := filepath.Join(c.dir, "proj", "b")
	done := make(chan error, 1)
	go func() {
		r := s.pendingOne(t)
		if r == nil {
			done <- errors.New("no request came")
			return
		}
		var edited map[string]any
		json.Unmarshal(r.Arguments, &edited)
		edited["targets"] = []string{keep}
		args, _ := json.Marshal(edited)
		_, err := s.approver.Decide(t.Context(), r.ID, client.Decision{Decision: "approve", Edit: &api.Edit{Arguments: args}})
		done <- err
	}()
	c.runReal("-r", "proj/a", "proj/b", "proj/c")
	if err := <-done; err != nil {
		t.Fatalf("edit and approve: %v", err)
	}
	c.wantExec("-r", "--", keep)
	if c.exists("proj/b") || !c.exists("proj/a/1.txt") || !c.exists("proj/c/3.txt") {
		t.Errorf("after the narrowed approval: a %v, b %v, c %v; want only b deleted\nstderr: %s",
			c.exists("proj/a"), c.exists("proj/b"), c.exists("proj/c"), c.stderr.String())
	}
	if se := c.stderr.String(); !strings.Contains(se, "kept only 1 of the 3 targets") {
		t.Errorf("stderr does not say the approver kept fewer targets:\n%s", se)
	}
}
