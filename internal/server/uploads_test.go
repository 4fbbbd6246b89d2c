package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/files"
	"github.com/countersign/countersign/internal/server"
)

// fEnv is the inbox environment with file transfer on.
type fEnv struct {
	*ibEnv
	files *files.Store
}

func fSetup(t *testing.T, opts ...func(*server.Config)) *fEnv {
	t.Helper()
	fs, err := files.Open(files.Config{Dir: filepath.Join(t.TempDir(), "files")})
	if err != nil {
		t.Fatal(err)
	}
	e := ibSetup(t, append([]func(*server.Config){func(c *server.Config) { c.Files = fs }}, opts...)...)
	return &fEnv{ibEnv: e, files: fs}
}

func (e *fEnv) page(p files.Principal, accept ...string) *files.Record {
	e.t.Helper()
	rec, err := e.files.OpenPage(p, "receipt", accept)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// multipartBody is the upload form as a browser sends it: the CSRF token
// first, then the file.
func multipartBody(csrf, name string, data []byte) (string, []byte) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if csrf != "" {
		mw.WriteField("csrf", csrf)
	}
	fw, _ := mw.CreateFormFile("file", name)
	fw.Write(data)
	mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}

// uploadFile posts a file to an upload page.
func (e *fEnv) uploadFile(s ibSession, id, csrf, name string, data []byte, mods ...ibMod) response {
	e.t.Helper()
	ct, body := multipartBody(csrf, name, data)
	req, err := http.NewRequestWithContext(e.Ctx, http.MethodPost, e.URL+"/uploads/"+id, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = e.Public.Host
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Origin", e.origin())
	e.as(s.id)(req)
	for _, m := range mods {
		m(req)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("upload: %v", err)
	}
	return readResponse(e.t, resp)
}

var receipt = []byte("%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n")

func TestUploadPage(t *testing.T) {
	t.Parallel()
	e := fSetup(t)
	owner := files.Principal{Account: e.Acme.ID, Key: "key-a"}
	page := e.page(owner, "application/pdf", "image/*")

	// Without a session: the sign-in form, with a way back to the page.
	e.get("/uploads/"+page.ID).wantRedirect(t, "no session", "/signin?next=%2Fuploads%2F"+page.ID)
	r := e.post("/signin", url.Values{"username": {"alice"}, "password": {ibPassword}, "next": {"/uploads/" + page.ID}}, ibFrom(e.nextAddr()))
	r.wantRedirect(t, "sign in back to the page", "/uploads/"+page.ID)
	alice := ibSession{id: e.sessionCookie(r).Value}
	// A next to another site goes to the inbox instead.
	r = e.post("/signin", url.Values{"username": {"alice"}, "password": {ibPassword}, "next": {"//evil.example/uploads/x"}}, ibFrom(e.nextAddr()))
	r.wantRedirect(t, "next to another site", "/approvals")

	got := e.get("/uploads/"+page.ID, e.as(alice.id)).want(t, "the page", http.StatusOK)
	for _, want := range []string{page.Reference, "receipt", "application/pdf, image/*", "20 MiB", "acme", `enctype="multipart/form-data"`, `type="file"`,
		"Asked by an agent key that is no longer listed", "<dt>This page</dt>", "<dt>The file</dt>"} {
		if !strings.Contains(got.body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if got.header.Get("Content-Security-Policy") == "" || got.header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("page headers %v", got.header)
	}
	alice.csrf = ibCSRF(t, got.body)

	// Another account's session: exactly the answer for an unknown id.
	bob := e.signIn("bob")
	foreign := e.get("/uploads/"+page.ID, e.as(bob.id)).want(t, "bob's view", http.StatusNotFound)
	unknown := e.get("/uploads/nosuchid", e.as(bob.id)).want(t, "unknown id", http.StatusNotFound)
	if foreign.body != unknown.body {
		t.Errorf("another account's page differs from an unknown one")
	}
	e.uploadFile(bob, page.ID, bob.csrf, "x.pdf", receipt).want(t, "bob uploads", http.StatusNotFound)

	// The hostile uploads change nothing.
	e.uploadFile(alice, page.ID, "", "x.pdf", receipt).want(t, "no CSRF token", http.StatusForbidden)
	e.uploadFile(alice, page.ID, bob.csrf, "x.pdf", receipt).want(t, "another session's token", http.StatusForbidden)
	e.uploadFile(alice, page.ID, alice.csrf, "x.pdf", receipt, ibHeader("Origin", "https://evil.example")).want(t, "foreign origin", http.StatusForbidden)
	e.uploadFile(alice, page.ID, alice.csrf, "x.pdf", receipt, ibHeader("Origin", "null")).want(t, "null origin", http.StatusForbidden)
	e.uploadFile(alice, page.ID, alice.csrf, "x.html", []byte("<html><script>alert(1)</script></html>")).want(t, "a kind the page does not take", http.StatusUnsupportedMediaType)
	if _, err := e.files.Upload(owner, page.ID); countersign.ErrorCode(err) != countersign.ECONFLICT {
		t.Fatalf("after the refused uploads: %v", err)
	}

	// The file: its name cleaned, its kind by content.
	// Control characters in a part's header are refused by the form's
	// parser; the page stays open.
	e.uploadFile(alice, page.ID, alice.csrf, "pass\x1bwd.pdf", receipt).want(t, "a name with an escape", http.StatusBadRequest)
	e.uploadFile(alice, page.ID, alice.csrf, "../../etc/pass\u202ewd.pdf", receipt).wantRedirect(t, "upload", "/uploads/"+page.ID)
	rec, err := e.files.Upload(owner, page.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Name != "passwd.pdf" || rec.MIME != "application/pdf" || rec.Size != int64(len(receipt)) {
		t.Fatalf("record %+v", rec)
	}
	data, _ := e.files.Read(rec)
	if !bytes.Equal(data, receipt) {
		t.Fatal("the stored file differs")
	}
	done := e.get("/uploads/"+page.ID, e.as(alice.id)).want(t, "the page after the upload", http.StatusOK)
	if !strings.Contains(done.body, rec.SHA256) || !strings.Contains(done.body, `<dd class="file-name">passwd.pdf</dd>`) ||
		strings.Contains(done.body, `type="file"`) || strings.Contains(done.body, "<dt>This page</dt>") {
		t.Errorf("the page after the upload:\n%s", done.body)
	}
	e.uploadFile(alice, page.ID, alice.csrf, "again.pdf", receipt).want(t, "a second file", http.StatusConflict)
	// Another key of the same account cannot use it.
	if _, err := e.files.Upload(files.Principal{Account: e.Acme.ID, Key: "key-a2"}, page.ID); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Fatalf("another key: %v", err)
	}
}

// TestUploadDeclaredTooLarge: a body that declares more than 20 MiB is
// refused before a byte of it is read, and frees its slot.
func TestUploadDeclaredTooLarge(t *testing.T) {
	t.Parallel()
	e := fSetup(t)
	owner := files.Principal{Account: e.Acme.ID, Key: "key-a"}
	page := e.page(owner)
	alice := e.signIn("alice")
	conn := e.raw(t, page.ID, alice, 21<<20)
	status := readStatus(t, conn)
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", status)
	}
	e.uploadFile(alice, page.ID, alice.csrf, "r.pdf", receipt).wantRedirect(t, "then a real upload", "/uploads/"+page.ID)
	// No Content-Length at all: refused too.
	page2 := e.page(owner)
	r := e.uploadFile(alice, page2.ID, alice.csrf, "r.pdf", receipt, func(r *http.Request) { r.ContentLength = -1; r.Body = io.NopCloser(r.Body) })
	r.want(t, "no Content-Length", http.StatusBadRequest)
}

// raw opens a TCP connection and sends an upload's head, declaring
// length bytes, and the form's start with the session's token.
func (e *fEnv) raw(t *testing.T, id string, s ibSession, length int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /uploads/%s HTTP/1.1\r\nHost: %s\r\nOrigin: %s\r\nCookie: %s=%s\r\n"+
		"Content-Type: multipart/form-data; boundary=XyZ\r\nContent-Length: %d\r\n\r\n",
		id, e.Public.Host, e.origin(), e.cookieName(), s.id, length)
	fmt.Fprintf(conn, "--XyZ\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n%s\r\n"+
		"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"r.pdf\"\r\n\r\n%%PDF-1.4\n", s.csrf)
	return conn
}

func readStatus(t *testing.T, conn net.Conn) int {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestUploadStall: a raw TCP client that sends the start of a body and
// then nothing gets 408 once the stall has passed, and its slot is free
// again. The stall is the network's read deadline; the limits are scaled
// down (a 500 ms stall, far from the total and with the rate not yet
// counted), and TestDefaultBodyLimits holds the server's own durations.
func TestUploadStall(t *testing.T) {
	t.Parallel()
	lim := server.BodyLimits{Total: 30 * time.Second, Stall: 500 * time.Millisecond, Grace: time.Minute, MinRate: 16 << 10}
	e := fSetup(t, func(c *server.Config) { c.UploadLimits = lim })
	owner := files.Principal{Account: e.Acme.ID, Key: "key-a"}
	page := e.page(owner)
	alice := e.signIn("alice")
	// Before the connection: the server cannot read the body, and so set
	// its deadline, any earlier.
	start := time.Now()
	conn := e.raw(t, page.ID, alice, 1<<20)
	if status := readStatus(t, conn); status != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", status)
	}
	if waited := time.Since(start); waited < lim.Stall {
		t.Fatalf("answered after %v, before the %v stall", waited, lim.Stall)
	}
	e.uploadFile(alice, page.ID, alice.csrf, "r.pdf", receipt).wantRedirect(t, "the slot is free", "/uploads/"+page.ID)
}

// TestUploadTrickle: a body at 8 KB/s is cut off with 408 once the grace
// has passed (the limits scaled down: 400 ms of grace, 16 KB/s), and the
// slot is free again.
func TestUploadTrickle(t *testing.T) {
	t.Parallel()
	e := fSetup(t, func(c *server.Config) {
		c.UploadLimits = server.BodyLimits{Total: 30 * time.Second, Stall: 2 * time.Second, Grace: 400 * time.Millisecond, MinRate: 16 << 10}
	})
	owner := files.Principal{Account: e.Acme.ID, Key: "key-a"}
	page := e.page(owner)
	alice := e.signIn("alice")
	conn := e.raw(t, page.ID, alice, 1<<20)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		chunk := bytes.Repeat([]byte("x"), 800)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond): // not a wait: the slow client's pace, 8 KB/s
			}
			if _, err := conn.Write(chunk); err != nil {
				return
			}
		}
	}()
	if status := readStatus(t, conn); status != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", status)
	}
	e.uploadFile(alice, page.ID, alice.csrf, "r.pdf", receipt).wantRedirect(t, "the slot is free", "/uploads/"+page.ID)
}

// TestUploadTotal: a body that keeps its pace but outlasts the total is
// cut off too.
func TestUploadTotal(t *testing.T) {
	t.Parallel()
	e := fSetup(t, func(c *server.Config) {
		c.UploadLimits = server.BodyLimits{Total: 600 * time.Millisecond, Stall: 300 * time.Millisecond, Grace: time.Minute, MinRate: 1}
	})
	page := e.page(files.Principal{Account: e.Acme.ID, Key: "key-a"})
	alice := e.signIn("alice")
	conn := e.raw(t, page.ID, alice, 1<<20)
	go func() {
		for range 50 {
			// Not a wait: this is the slow client, writing a byte
			// every 100 ms so that it keeps its pace but outlasts
			// the total.
			time.Sleep(100 * time.Millisecond)
			if _, err := conn.Write([]byte("y")); err != nil {
				return
			}
		}
	}()
	if status := readStatus(t, conn); status != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", status)
	}
}
