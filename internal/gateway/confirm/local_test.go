package confirm

import (
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// TestLocalPageShowsHiddenCharacters: the standalone gateway's page shows
// every hidden character of a preview as an escape, even of one that did
// not come from Preview (which escapes them already).
func TestLocalPageShowsHiddenCharacters(t *testing.T) {
	t.Parallel()
	s := testserver.New(t, testserver.At(time.Now().UTC()), testserver.WallClock())
	ctx, store, svc := s.Ctx, s.Store, s.Service
	s.Account("local")
	agent, err := s.Auth.Agent(ctx, s.Key("local", "mcp"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	const preview = "send_mail to=a@example.com\u00ad\u200b\u2060\ufeff \u202etxt.exe\U000e0041 \x1b[2K"
	// The service refuses such a preview now; a request stored before it
	// did is still shown on the page, escaped.
	if _, _, err := svc.Create(ctx, agent, countersign.CreateInput{Kind: countersign.KindMCP, Action: "send_mail", Preview: preview}); countersign.ErrorCode(err) != countersign.EINVALID {
		t.Fatalf("Create with hidden characters: %v, want EINVALID", err)
	}
	now := time.Now()
	r, _, err := store.CreateRequest(ctx, &countersign.Request{ID: countersign.NewOrderedID("req_"), AccountID: agent.AccountID, KeyID: agent.KeyID,
		KeyName: agent.KeyName, Reference: countersign.NewReference(), Kind: countersign.KindMCP, Action: "send_mail", Arguments: []byte("{}"),
		ArgsHash: approval.Hash([]byte("{}")), Preview: preview, PreviewHash: approval.Hash([]byte(preview)), Status: countersign.StatusPending,
		CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute)}, 0, now, countersign.AuditEvent{Event: "created", Actor: "key:" + agent.KeyID, Detail: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	var file string
	p, err := newLocalPage(svc, agent, func(f string) error { file = f; return nil }, filepath.Join(t.TempDir(), "pages"), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	if err := p.open(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	// The browser follows the file's refresh to the one-time link, which
	// sets the page's cookie and sends it on to the page.
	content, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`url=([^"]+)"`).FindSubmatch(content)
	if m == nil {
		t.Fatalf("the opener's file %q leads nowhere", content)
	}
	jar, _ := cookiejar.New(nil)
	resp, err := (&http.Client{Jar: jar}).Get(html.UnescapeString(string(m[1])))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	if resp.StatusCode != http.StatusOK || strings.ContainsAny(page, "\u00ad\u200b\u2060\ufeff\u202e\U000e0041\x1b") {
		t.Errorf("the page (%d) holds a hidden character raw:\n%q", resp.StatusCode, page)
	}
	if want := `a@example.com\u00ad\u200b\u2060\ufeff \u202etxt.exe\U000e0041 \x1b[2K`; !strings.Contains(page, want) {
		t.Errorf("the page does not show %s:\n%s", want, page)
	}
}
