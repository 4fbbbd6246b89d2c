package files

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

// TestFetchUploadAnswerSealed: what comes back from the holder is the
// holder's: a file swapped on the way between the replicas, with a record
// that matches it, is refused, so the bytes an approval's SHA-256 covers
// are the bytes the upstream gets.
func TestFetchUploadAnswerSealed(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	ln := httptest.NewUnstartedServer(nil)
	la, _ := NewLocator(key, "http://"+ln.Listener.Addr().String())
	a, _ := Open(Config{Locator: la})
	ln.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/internal/uploads/")
		if !a.CheckReplica(r, id) {
			http.NotFound(w, r)
			return
		}
		rec, err := a.Upload(alice, id)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		data, _ := a.Read(rec)
		if r.Header.Get("X-Swap") != "" {
			// Between the replicas: another file, and a record to match.
			// The holder's MAC stays; nobody else can make one.
			real := httptest.NewRecorder()
			a.ServeUpload(real, r, rec, data)
			data = []byte("%PDF-1.4 another file")
			sum := sha256.Sum256(data)
			rec.Size, rec.SHA256 = int64(len(data)), hex.EncodeToString(sum[:])
			w.Header().Set(hdrMAC, real.Header().Get(hdrMAC))
			b, _ := json.Marshal(remoteRecord{Reference: rec.Reference, Purpose: rec.Purpose, Name: rec.Name, MIME: rec.MIME,
				SHA256: rec.SHA256, Size: rec.Size, Expires: rec.Expires})
			w.Header().Set(hdrRecord, string(b))
			w.Write(data)
			return
		}
		a.ServeUpload(w, r, rec, data)
	})
	ln.Start()
	defer ln.Close()
	lb, _ := NewLocator(key, "http://10.0.0.2:8080")
	b, _ := Open(Config{Locator: lb})
	rec := upload(t, a, alice, "r.pdf", []byte("%PDF-1.4 the receipt"))

	got, data, err := b.FetchUpload(t.Context(), alice, rec.ID, "Bearer csk_a")
	if err != nil || got.SHA256 != rec.SHA256 || string(data) != "%PDF-1.4 the receipt" {
		t.Fatalf("the holder's answer: %v", err)
	}
	b.cfg.Locator.client = &http.Client{Transport: swapRT{}}
	if _, _, err := b.FetchUpload(t.Context(), alice, rec.ID, "Bearer csk_a"); err == nil {
		t.Fatal("a file swapped between the replicas was taken")
	}
}

// swapRT asks the test holder to answer with another file.
type swapRT struct{}

func (swapRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Swap", "1")
	return http.DefaultTransport.RoundTrip(r)
}
