package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCreateFingerprintBody: a create's scope is fingerprinted with every
// field, as it always was, so that a retry with an Idempotency-Key still
// matches a first call answered by another version of the server; and it
// reaches the service as the agent stated it.
func TestCreateFingerprintBody(t *testing.T) {
	in := createInput{Scope: &scopeInput{Paths: []string{"/src/a"}, Files: 2}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	const want = `"scope":{"commands":null,"paths":["/src/a"],"files":2,"bytes":0,"files_capped":false}`
	if !strings.Contains(string(b), want) {
		t.Errorf("the body fingerprinted is %s, want it to hold %s", b, want)
	}
	if sc := in.Scope.scope(); len(sc.Paths) != 1 || sc.Paths[0] != "/src/a" || sc.Files != 2 || sc.Classes != nil {
		t.Errorf("scope() = %+v", sc)
	}
	if (*scopeInput)(nil).scope() != nil {
		t.Errorf("no scope stated became one")
	}
}
