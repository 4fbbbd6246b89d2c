package gateway

import "testing"

// TestNotNormal: what keeps a URI from the normal form its tier is
// decided on, and what does not.
func TestNotNormal(t *testing.T) {
	for uri, want := range map[string]string{
		"file:///srv/secret/plan.txt":   "",
		"file:///srv/secret/":           "",
		"file:///srv/a%20b%C3%A9.txt":   "",
		"https://example.com/a?q=1#top": "",
		"note:abc":                      "",
		"file://localhost/srv":          "",
		"file:///srv/secret//plan.txt":  "an empty segment (//)",
		"file:////srv":                  "an empty segment (//)",
		"file:///srv/./secret":          "a dot segment (.)",
		"file:///srv/public/../secret":  "a dot segment (..)",
		"file:///srv/x?/../secret":      "a dot segment (..)",
		"file:///srv/..":                "a dot segment (..)",
		"file:///srv/secret/%70lan.txt": "an escaped character that needs no escape (%70)",
		"file:///srv/%2E%2E/secret":     "an escaped character that needs no escape (%2E)",
		"file:///srv/a%c3%a9":           "an escape in lower case (%c3)",
		"file:///srv%2Fsecret":          "an escaped separator (%2F)",
		"file:///srv%5Csecret":          "an escaped separator (%5C)",
		"file:///srv%2":                 "a broken escape",
		"file:///srv%zz":                "a broken escape",
		`file:///srv\secret`:            "a backslash",
		"FILE:///srv/secret":            "an upper-case scheme",
		"file://LOCALHOST/srv/secret":   "an upper-case host",
		"file://User@localhost/srv":     "",
		"/srv/secret/plan.txt":          "no scheme",
		"1file:///srv":                  "no scheme",
	} {
		if got := notNormal(uri); got != want {
			t.Errorf("notNormal(%q) = %q, want %q", uri, got, want)
		}
	}
}
