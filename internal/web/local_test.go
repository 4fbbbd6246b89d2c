package web

import (
	"strings"
	"testing"
)

// TestLocalPages: the standalone gateway's pages parse, show the decision
// forms only while a request is pending, and escape what an agent wrote.
func TestLocalPages(t *testing.T) {
	p, err := ParseLocal()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := p.Confirm(&b, LocalConfirm{Ref: "ABC-123", Status: "pending", Preview: "<script>x</script>\u202e", Expires: "10:00:00", Pending: true}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"Request <strong>ABC-123</strong> · pending · expires 10:00:00", `value="approve"`, `value="deny"`, "&lt;script&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("pending page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, "\u202e") {
		t.Errorf("the preview reached the page unescaped:\n%s", page)
	}
	b.Reset()
	if err := p.Confirm(&b, LocalConfirm{Ref: "ABC-123", Status: "approved", Done: "Approved once."}); err != nil {
		t.Fatal(err)
	}
	if page := b.String(); strings.Contains(page, "<form") || !strings.Contains(page, "<p>Approved once.</p>") {
		t.Errorf("decided page:\n%s", page)
	}
	b.Reset()
	if err := p.Redirect(&b, `http://127.0.0.1:1/l/"><x`); err != nil {
		t.Fatal(err)
	}
	if page := b.String(); strings.Contains(page, `"><x`) || !strings.Contains(page, `name="referrer" content="no-referrer"`) {
		t.Errorf("redirect page:\n%s", page)
	}
}
