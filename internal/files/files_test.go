package files

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/testutil"
)

var (
	alice  = Principal{Account: "acc_a", Key: "key_a1"}
	alice2 = Principal{Account: "acc_a", Key: "key_a2"}
	bob    = Principal{Account: "acc_b", Key: "key_b1"}
)

func newStore(t *testing.T, dir string, maxBytes int64) (*Store, *testutil.Clock) {
	t.Helper()
	clock := testutil.NewClock(time.Date(2026, 11, 9, 12, 0, 0, 0, time.UTC))
	s, err := Open(Config{Dir: dir, MaxBytes: maxBytes, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return s, clock
}

var pdf = []byte("%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n")

// upload opens a page for p and fills it with data.
func upload(t *testing.T, s *Store, p Principal, name string, data []byte) *Record {
	t.Helper()
	page, err := s.OpenPage(p, "receipt", nil)
	if err != nil {
		t.Fatalf("open page: %v", err)
	}
	up, err := s.BeginUpload(p.Account, page.ID, int64(len(data)), MaxUpload)
	if err != nil {
		t.Fatalf("begin upload: %v", err)
	}
	rec, err := up.Finish(name, append([]byte(nil), data...))
	if err != nil {
		t.Fatalf("finish upload: %v", err)
	}
	return rec
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := countersign.ErrorCode(err); got != code {
		t.Fatalf("%s: code %q (%v), want %q", what, got, err, code)
	}
}

func TestUploadRoundTrip(t *testing.T) {
	for _, dir := range []string{"", "disk"} {
		t.Run("dir="+dir, func(t *testing.T) {
			if dir != "" {
				dir = filepath.Join(t.TempDir(), "files")
			}
			s, _ := newStore(t, dir, 0)
			rec := upload(t, s, alice, "../../etc/passwd", pdf)
			sum := sha256.Sum256(pdf)
			if rec.MIME != "application/pdf" || rec.Size != int64(len(pdf)) || rec.SHA256 != hex.EncodeToString(sum[:]) || rec.Name != "passwd" {
				t.Fatalf("record %+v", rec)
			}
			got, err := s.Upload(alice, rec.ID)
			if err != nil {
				t.Fatal(err)
			}
			data, err := s.Read(got)
			if err != nil || !bytes.Equal(data, pdf) {
				t.Fatalf("read: %v %q", err, data)
			}
			// Another key of the same account, another account: unknown.
			_, err = s.Upload(alice2, rec.ID)
			wantCode(t, "other key", err, countersign.ENOTFOUND)
			_, err = s.Upload(bob, rec.ID)
			wantCode(t, "other account", err, countersign.ENOTFOUND)
			_, _, err = s.Fetch(bob.Account, rec.ID)
			wantCode(t, "fetch by other account", err, countersign.ENOTFOUND)
			if dir != "" {
				// On disk only ciphertext, under a name that is no id.
				entries, _ := os.ReadDir(dir)
				if len(entries) != 1 || entries[0].Name() == rec.ID {
					t.Fatalf("folder: %v", entries)
				}
				raw, _ := os.ReadFile(filepath.Join(dir, entries[0].Name()))
				if bytes.Contains(raw, []byte("%PDF")) {
					t.Fatal("the file on disk holds plain text")
				}
			}
		})
	}
}

// TestSealedForItsRecord: a blob opens only with its own id, account and
// kind, never under another process's key, and not when cut short at a
// chunk's end or changed.
func TestSealedForItsRecord(t *testing.T) {
	s, _ := newStore(t, "", 0)
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*chunkSize/16+100) // four chunks
	rec := upload(t, s, alice, "a.pdf", append(append([]byte(nil), pdf...), big...))
	sealed := s.blobs.(*memBlobs).m[rec.ID]
	open := func(box *sealer, blob []byte, r *Record) error {
		rd, err := box.reader(io.NopCloser(bytes.NewReader(blob)), ad(r), r.Size)
		if err != nil {
			return err
		}
		_, err = io.ReadAll(rd)
		return err
	}
	if err := open(s.box, sealed, rec); err != nil {
		t.Fatalf("the blob does not open: %v", err)
	}
	other := *rec
	other.Owner = bob
	if open(s.box, sealed, &other) == nil {
		t.Fatal("a blob opened under another account")
	}
	other = *rec
	other.Kind = KindDownload
	if open(s.box, sealed, &other) == nil {
		t.Fatal("a blob opened as another kind")
	}
	s2, _ := newStore(t, "", 0)
	if open(s2.box, sealed, rec) == nil {
		t.Fatal("a blob opened under another process's key")
	}
	cut := *rec
	cut.Size = 3 * chunkSize
	if open(s.box, sealed[:prefixLen+3*(chunkSize+tagSize)], &cut) == nil {
		t.Fatal("a blob cut at a chunk's end opened")
	}
	changed := append([]byte(nil), sealed...)
	changed[prefixLen+chunkSize+tagSize+5] ^= 1
	if open(s.box, changed, rec) == nil {
		t.Fatal("a changed blob opened")
	}
}

func TestFolderEmptiedAtOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "files")
	s, _ := newStore(t, dir, 0)
	upload(t, s, alice, "a.pdf", pdf)
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("folder holds %d files", len(entries))
	}
	if _, err := Open(Config{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("after a new start the folder holds %d files", len(entries))
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("folder mode %v", fi.Mode())
	}
}

func TestPageAndRecordLimits(t *testing.T) {
	s, clock := newStore(t, "", 0)
	var pages []*Record
	for range MaxPages {
		p, err := s.OpenPage(alice, "receipt", nil)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, p)
	}
	_, err := s.OpenPage(alice2, "receipt", nil)
	wantCode(t, "sixth page", err, countersign.ELIMIT)
	if _, err := s.OpenPage(bob, "receipt", nil); err != nil {
		t.Fatalf("another account's page: %v", err)
	}
	// A page expires after 15 minutes, and makes room.
	clock.Advance(PageTTL + time.Second)
	if _, err := s.Page(alice.Account, pages[0].ID); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Fatalf("expired page: %v", err)
	}
	for range MaxRecords {
		if _, err := s.PutDownload(alice, "r.txt", "text/plain", []byte("hello")); err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.PutDownload(alice, "r.txt", "text/plain", []byte("hello"))
	wantCode(t, "eleventh record", err, countersign.ELIMIT)
	_, err = s.OpenPage(alice, "receipt", nil)
	wantCode(t, "page with ten records", err, countersign.ELIMIT)
	clock.Advance(DefaultTTL + time.Second)
	if _, err := s.PutDownload(alice, "r.txt", "text/plain", []byte("hello")); err != nil {
		t.Fatalf("after the records expired: %v", err)
	}
}

func TestSpaceBounds(t *testing.T) {
	s, _ := newStore(t, "", 64<<20) // a quarter is 16 MiB: one upload, 20 MiB
	if s.PerAccount() != MaxUpload {
		t.Fatalf("share %d", s.PerAccount())
	}
	big := bytes.Repeat([]byte("x"), 15<<20)
	if _, err := s.PutDownload(alice, "a", "", big); err != nil {
		t.Fatal(err)
	}
	_, err := s.PutDownload(alice, "b", "", big)
	wantCode(t, "over the account's share", err, countersign.ELIMIT)
	if _, err := s.PutDownload(bob, "b", "", big); err != nil {
		t.Fatal(err)
	}
	// 30 MiB of 64 used: carol holds something and may not take the last
	// upload's room, dave holds nothing and may.
	carol := Principal{Account: "acc_c", Key: "k"}
	if _, err := s.PutDownload(carol, "c", "", []byte("small")); err != nil {
		t.Fatal(err)
	}
	_, err = s.PutDownload(carol, "c", "", big)
	wantCode(t, "into the room kept free", err, countersign.ELIMIT)
	dave := Principal{Account: "acc_d", Key: "k"}
	if _, err := s.PutDownload(dave, "d", "", big); err != nil {
		t.Fatalf("an account that holds nothing: %v", err)
	}
	// The declared length is checked before a body is read.
	page, _ := s.OpenPage(alice, "receipt", nil)
	_, err = s.BeginUpload(alice.Account, page.ID, MaxUpload+1, MaxUpload)
	wantCode(t, "declared over 20 MiB", err, countersign.ETOOLARGE)
	_, err = s.BeginUpload(alice.Account, page.ID, 10<<20, MaxUpload)
	wantCode(t, "declared over the share", err, countersign.ELIMIT)
	if s.Crowding() != 3 {
		t.Fatalf("crowding %d", s.Crowding())
	}
	if _, err := Open(Config{MaxBytes: 39 << 20}); err == nil {
		t.Fatal("a space below two uploads was taken")
	}
}

func TestUploadSlots(t *testing.T) {
	s, _ := newStore(t, "", 0)
	carol := Principal{Account: "acc_c", Key: "k"}
	pa, _ := s.OpenPage(alice, "receipt", nil)
	pa2, _ := s.OpenPage(alice, "receipt", nil)
	pb, _ := s.OpenPage(bob, "receipt", nil)
	pc, _ := s.OpenPage(carol, "receipt", nil)
	ua, err := s.BeginUpload(alice.Account, pa.ID, 100, MaxUpload)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.BeginUpload(alice.Account, pa2.ID, 100, MaxUpload)
	wantCode(t, "second upload of an account", err, countersign.ELIMIT)
	ub, err := s.BeginUpload(bob.Account, pb.ID, 100, MaxUpload)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.BeginUpload(carol.Account, pc.ID, 100, MaxUpload)
	wantCode(t, "third upload of the server", err, countersign.ELIMIT)
	ua.Release()
	ub.Release()
	if _, err := s.BeginUpload(carol.Account, pc.ID, 100, MaxUpload); err != nil {
		t.Fatalf("after the slots were freed: %v", err)
	}
	// A page of another account answers as unknown.
	_, err = s.BeginUpload(bob.Account, pa2.ID, 100, MaxUpload)
	wantCode(t, "other account's page", err, countersign.ENOTFOUND)
}

func TestKindByContent(t *testing.T) {
	s, _ := newStore(t, "", 0)
	page, _ := s.OpenPage(alice, "receipt", []string{"application/pdf", "image/*"})
	up, _ := s.BeginUpload(alice.Account, page.ID, 100, MaxUpload)
	_, err := up.Finish("receipt.pdf", []byte("<html><script>alert(1)</script></html>"))
	wantCode(t, "HTML named .pdf", err, countersign.EUNSUPPORTED)
	up, err = s.BeginUpload(alice.Account, page.ID, int64(len(pdf)), MaxUpload)
	if err != nil {
		t.Fatalf("the page stays open after a refused kind: %v", err)
	}
	rec, err := up.Finish("x", pdf)
	if err != nil || rec.MIME != "application/pdf" {
		t.Fatalf("pdf: %v %+v", err, rec)
	}
	_, err = s.BeginUpload(alice.Account, page.ID, 10, MaxUpload)
	wantCode(t, "second file", err, countersign.ECONFLICT)
}

func TestDownloadCount(t *testing.T) {
	s, _ := newStore(t, "", 0)
	rec, err := s.PutDownload(alice, "r.txt", "text/plain", []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range LinkDownloads {
		_, r, err := s.Fetch(alice.Account, rec.ID)
		var data []byte
		if err == nil {
			data, _ = io.ReadAll(r)
			r.Close()
		}
		if err != nil || string(data) != "hello" {
			t.Fatalf("download %d: %v %q", i+1, err, data)
		}
	}
	_, _, err = s.Fetch(alice.Account, rec.ID)
	wantCode(t, "sixth download", err, countersign.ELIMIT)
}

func TestCleanName(t *testing.T) {
	for in, want := range map[string]string{
		"../../etc/passwd":       "passwd",
		`C:\Users\x\receipt.pdf`: "receipt.pdf",
		"a\x00b\nc\x1b[31m.pdf":  "abc[31m.pdf",
		"..":                     "file",
		"\u202egnp.exe":          "gnp.exe",
		`"quoted";.pdf`:          "quoted.pdf",
	} {
		if got := cleanName(in); got != want {
			t.Errorf("cleanName(%q) = %q, want %q", in, got, want)
		}
	}
	// The name is the file's name in the gateway's path mode: a long
	// name in a script of three-byte letters still fits a file system's
	// 255 bytes.
	long := cleanName(strings.Repeat("文", 120) + ".pdf")
	if len(long) > 200 || !utf8.ValidString(long) {
		t.Errorf("a long name is %d bytes", len(long))
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, long), []byte("x"), 0o600); err != nil {
		t.Errorf("a cleaned name is no file name: %v", err)
	}
}

// TestLogs: log lines carry reference, kind, size and SHA-256, never a
// record's id or a file's name.
func TestLogs(t *testing.T) {
	var buf testutil.LogBuffer
	s, err := Open(Config{Log: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rec := upload(t, s, alice, "secret-invoice-name.pdf", pdf)
	if _, _, err := s.Fetch(alice.Account, rec.ID); err != nil {
		t.Fatal(err)
	}
	dl, _ := s.PutDownload(alice, "other-secret.csv", "text/csv", []byte("a,b\n"))
	log := buf.String()
	for _, bad := range []string{rec.ID, dl.ID, "secret-invoice-name", "other-secret"} {
		if strings.Contains(log, bad) {
			t.Errorf("the log holds %q:\n%s", bad, log)
		}
	}
	for _, want := range []string{rec.Reference, rec.SHA256, "kind=application/pdf", "size=" + strconv.Itoa(len(pdf))} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}

// TestMemoryBlobSize: in memory a blob is held in one buffer of exactly
// its sealed size, whatever the file's size against the chunks.
func TestMemoryBlobSize(t *testing.T) {
	s, clock := newStore(t, "", 0)
	for _, n := range []int{1, chunkSize - len(pdf), chunkSize, 2*chunkSize - len(pdf), 3*chunkSize + 7} {
		data := append(append([]byte(nil), pdf...), bytes.Repeat([]byte("x"), n)...)
		rec := upload(t, s, alice, "r.pdf", data)
		blob := s.blobs.(*memBlobs).m[rec.ID]
		if int64(len(blob)) != sealedSize(rec.Size) || cap(blob) != len(blob) {
			t.Errorf("%d bytes: blob of %d (cap %d), want %d", len(data), len(blob), cap(blob), sealedSize(rec.Size))
		}
		got, err := s.Read(rec)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: read back %d bytes, %v", len(data), len(got), err)
		}
		clock.Advance(DefaultTTL + time.Minute)
	}
}
