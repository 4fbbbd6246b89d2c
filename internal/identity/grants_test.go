package identity

import (
	"regexp"
	"testing"
)

// TestGrantKeyName: a grant's key is named after its client within the
// rules of key names, and unique by the grant.
func TestGrantKeyName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	for client, want := range map[string]string{
		"Claude":             "grant-claude-abc",
		"Go SDK test client": "grant-go-sdk-test-client-abc",
		"<script>":           "grant-script-abc",
		"日本語":                "grant-client-abc",
		"":                   "grant-client-abc",
		"A very long client name that goes on and on": "grant-a-very-long-client-name-abc",
	} {
		got := grantKeyName(client, "grt_abc")
		if got != want || !valid.MatchString(got) || ValidName("key", got) != nil {
			t.Errorf("grantKeyName(%q) = %q, want %q (a valid key name)", client, got, want)
		}
	}
	long := grantKeyName("A very long client name that goes on and on", "grt_"+"abcdefghijklmnopqrstuvwxyz")
	if ValidName("key", long) != nil {
		t.Errorf("%q is no valid key name", long)
	}
}
