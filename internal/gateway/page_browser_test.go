package gateway_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/countersign/countersign/internal/testutil"
)

// TestStandalonePageChromium: the file the opener gets leads a real
// browser to the local page, whose button approves; the retry runs. The
// one-time link is then spent: opening the file's link again shows that it
// was already opened.
func TestStandalonePageChromium(t *testing.T) {
	t.Parallel()
	exe := "/usr/bin/chromium"
	if _, err := os.Stat(exe); err != nil {
		if exe, err = exec.LookPath("chromium"); err != nil {
			testutil.Missing(t, "no Chromium: neither /usr/bin/chromium nor chromium in PATH (apt-get install -y chromium)")
		}
	}
	s := newStandalone(t)
	cs := stdioConnect(t, s.g, clientOpts{})
	args := map[string]any{"to": "chromium@example.com"}
	wantStatus(t, call(t, cs, "send_mail", args), "approval_pending")
	file := s.lastLink(t)
	content, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	link := refresh.FindSubmatch(content)
	if link == nil {
		t.Fatalf("file %q", content)
	}

	ctx := newBrowser(t, exe)
	text := func() string {
		v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		return v
	}
	waitText := func(want string) {
		t.Helper()
		if !testutil.Wait(func() bool { return strings.Contains(text(), want) }, testutil.EventuallyWithin) {
			t.Fatalf("the browser never showed %q; it shows %q", want, text())
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+file)); err != nil {
		t.Fatal(err)
	}
	waitText("chromium@example.com")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`input[value="approve"] + button`))); err != nil {
		t.Fatal(err)
	}
	waitText("Approved once")
	wantRan(t, call(t, cs, "send_mail", args), "sent to chromium@example.com")
	if err := chromedp.Do(ctx, chromedp.Navigate(strings.ReplaceAll(string(link[1]), "&amp;", "&"))); err != nil {
		t.Fatal(err)
	}
	waitText("already opened")
}
