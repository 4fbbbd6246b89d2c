package server

import "testing"

// TestSafeReturn: a form returns the browser only to a relative path of
// one of the server's own pages; anything that a browser could read as
// another host, or that leaves the page it names, is dropped.
func TestSafeReturn(t *testing.T) {
	for _, tc := range []struct {
		next, want string
	}{
		{"/approvals/req_abc", "/approvals/req_abc"},
		{"/approvals", "/approvals"},
		{"/passkeys?added=pk_1", "/passkeys?added=pk_1"},
		{"/oauth/authorize?client_id=x&state=y", "/oauth/authorize?client_id=x&state=y"},
		{"", ""},
		{"approvals", ""},
		{"//evil.example/approvals", ""},
		{"/\\evil.example/approvals", ""},
		{"https://evil.example/approvals", ""},
		{"javascript:alert(1)", ""},
		{"/approvals/../signout", ""},
		{"/approvals/%2e%2e/signout", ""},
		{"/approvals/x\r\nLocation: x", ""},
		{"/approvals/\x00", ""},
		{"/signout", ""},
		{"/static/app.css", ""},
		{"/approvalsX", ""},
	} {
		got, ok := safeReturn(tc.next)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("safeReturn(%q) = %q, %v; want %q", tc.next, got, ok, tc.want)
		}
	}
	if got := safeNext("//evil.example"); got != "/approvals" {
		t.Errorf("safeNext of another host: %q", got)
	}
}
