package api_test

import (
	"encoding/json"
	"testing"

	"github.com/countersign/countersign/client/api"
)

// TestScopeWire: a Scope is written as clients have always sent it: the
// five fields an agent states, each left out when empty.
func TestScopeWire(t *testing.T) {
	for _, tt := range []struct {
		sc   api.Scope
		want string
	}{
		{api.Scope{Commands: []string{"rm"}, Paths: []string{"/a"}, Files: 1, Bytes: 2, FilesCapped: true},
			`{"commands":["rm"],"paths":["/a"],"files":1,"bytes":2,"files_capped":true}`},
		{api.Scope{}, `{}`},
	} {
		b, err := json.Marshal(tt.sc)
		if err != nil || string(b) != tt.want {
			t.Errorf("Marshal = %s, %v; want %s", b, err, tt.want)
		}
	}
}
