package files

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// TestLocator: ids name their holder, opaquely; a changed or foreign id
// names no replica; the internal route's HMAC covers the id, the time and
// the agent's credential.
func TestLocator(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	la, _ := NewLocator(key, "http://10.0.0.1:8080")
	lb, _ := NewLocator(key, "http://10.0.0.2:8080")
	a, _ := Open(Config{Locator: la})
	b, _ := Open(Config{Locator: lb})
	rec, err := a.PutDownload(alice, "r.txt", "text/plain", []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rec.ID, "10.0.0") {
		t.Fatal("the id shows the holder's address")
	}
	if _, remote := a.Remote(rec.ID); remote {
		t.Fatal("a's own record is remote to a")
	}
	if at, remote := b.Remote(rec.ID); !remote || at != "http://10.0.0.1:8080" {
		t.Fatalf("b finds %q %v", at, remote)
	}
	forged := rec.ID[:len(rec.ID)-2] + "aa"
	if _, remote := b.Remote(forged); remote {
		t.Fatal("a changed id names a replica")
	}
	other, _ := NewLocator(bytes.Repeat([]byte{8}, 32), "http://10.0.0.3:8080")
	c, _ := Open(Config{Locator: other})
	if _, remote := c.Remote(rec.ID); remote {
		t.Fatal("an id opened under another key")
	}

	req := httptest.NewRequest(http.MethodGet, "/internal/uploads/"+rec.ID, nil)
	req.Header.Set("Authorization", "Bearer csk_a")
	r2, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "/", nil)
	r2.Header.Set("Authorization", "Bearer csk_a")
	ts := a.cfg.Clock.Now().Unix()
	r2.Header.Set(hdrTime, itoa(ts))
	r2.Header.Set(hdrMAC, la.mac(rec.ID, itoa(ts), "Bearer csk_a"))
	if !a.CheckReplica(r2, rec.ID) {
		t.Fatal("a good HMAC was refused")
	}
	r2.Header.Set("Authorization", "Bearer csk_b")
	if a.CheckReplica(r2, rec.ID) {
		t.Fatal("the HMAC did not cover the credential")
	}
	if a.CheckReplica(req, rec.ID) {
		t.Fatal("a request without the HMAC passed")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
