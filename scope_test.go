package countersign

import (
	"reflect"
	"testing"
)

// TestScopeStored: a scope is stored as it always was, the agent's part
// and the server's in one flat JSON object, and what was stored reads
// back.
func TestScopeStored(t *testing.T) {
	const stored = `{"commands":["git push","rm"],"paths":["/src"],"files":7,"bytes":9,"files_capped":true,"classes":["x"],"tier":"commit","protected":true}`
	sc := &Scope{StatedScope: StatedScope{Commands: []string{"git push", "rm"}, Paths: []string{"/src"}, Files: 7, Bytes: 9, FilesCapped: true},
		Classes: []string{"x"}, Tier: TierCommit, Protected: true}
	if got := EncodeScope(sc); got != stored {
		t.Errorf("EncodeScope = %s, want %s", got, stored)
	}
	back, err := DecodeScope(stored)
	if err != nil || !reflect.DeepEqual(back, sc) {
		t.Errorf("DecodeScope = %+v, %v", back, err)
	}
	if got := EncodeScope(&Scope{StatedScope: StatedScope{Paths: []string{"/a"}}}); got != `{"paths":["/a"]}` {
		t.Errorf("EncodeScope of a path = %s", got)
	}
	if EncodeScope(nil) != "" {
		t.Errorf("EncodeScope(nil) is not empty")
	}
}
