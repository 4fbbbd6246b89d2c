package cli

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// TestHideURLs: whatever form an upstream's error names its URL in, the
// text doctor shows keeps scheme, host and path, and neither user info,
// query nor fragment.
func TestHideURLs(t *testing.T) {
	raw := `https://someone:pw_secret@mcp.example.com:8443/mcp?token=tok_secret&x="q r"#frag_secret`
	p, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("dial tcp 203.0.113.9:8443: connect: connection refused")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"net/http's url.Error, wrapped", fmt.Errorf("calling %q: %w", "initialize", &url.Error{Op: "Post", URL: p.Redacted(), Err: refused}),
			`calling "initialize": Post "https://mcp.example.com:8443/mcp": ` + refused.Error()},
		{"its text alone", fmt.Errorf("rejected by transport: %v", &url.Error{Op: "Post", URL: p.Redacted(), Err: refused}),
			`rejected by transport: Post "https://mcp.example.com:8443/mcp": ` + refused.Error()},
		{"as configured", fmt.Errorf("cannot reach %s: %w", raw, refused),
			"cannot reach https://mcp.example.com:8443/mcp: " + refused.Error()},
		{"another URL", fmt.Errorf("redirected to https://u:p@other.example/x?session=abcd1234"),
			"redirected to https://other.example/x"},
		{"a part left", fmt.Errorf("bad token tok_secret"),
			"(its error is not shown: it holds a part of the URL that may be secret)"},
	} {
		got := hideURLs(tc.err, raw)
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		for _, secret := range []string{"someone", "pw_secret", "tok_secret", "q r", "frag_secret", "abcd1234"} {
			if strings.Contains(got, secret) {
				t.Errorf("%s: %q holds %q", tc.name, got, secret)
			}
		}
	}
}
