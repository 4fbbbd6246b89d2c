package server_test

import (
	"bytes"
	"crypto/rand"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/files"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// benchFiles is the real handler with file transfer on disk, a signed-in
// session of acme, and a clock the benchmark moves to expire records.
type benchFiles struct {
	url, host, cookie, csrf string
	files                   *files.Store
	clock                   *testutil.Clock
	account                 string
}

func newBenchFiles(b *testing.B) *benchFiles {
	b.Helper()
	// Sign-in sessions run on the wall clock: the World starts near it.
	var fs *files.Store
	s := testserver.New(b, testserver.Quiet(), testserver.At(time.Now()), testserver.WallClock(),
		testserver.Config(func(s *testserver.Server, c *server.Config) {
			var err error
			if fs, err = files.Open(files.Config{Dir: filepath.Join(b.TempDir(), "files"), Clock: s.Clock}); err != nil {
				b.Fatal(err)
			}
			c.Files = fs
		}))
	acme := s.Acme
	e := &benchFiles{url: s.URL, host: s.Public.Host, files: fs, clock: s.Clock, account: acme.ID, cookie: s.SignIn(b, nil, "alice").Value}
	page, _ := fs.OpenPage(files.Principal{Account: acme.ID, Key: "k"}, "receipt", nil)
	resp := e.do(b, http.MethodGet, "/uploads/"+page.ID, "", nil)
	body, _ := io.ReadAll(resp.Body)
	e.csrf = regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(string(body))[1]
	return e
}

var benchClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (e *benchFiles) do(b *testing.B, method, path, ct string, body io.Reader) *http.Response {
	req, _ := http.NewRequest(method, e.url+path, body)
	req.Host = e.host
	req.Header.Set("Origin", "http://"+e.host)
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if e.cookie != "" {
		req.AddCookie(&http.Cookie{Name: "countersign_session", Value: e.cookie})
	}
	resp, err := benchClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	return resp
}

const benchSize = files.MaxUpload // 20 MiB

func benchPayload() []byte {
	data := make([]byte, benchSize)
	rand.Read(data)
	copy(data, "%PDF-1.4\n")
	return data
}

// multipartOf is the upload form around data, built once.
func multipartOf(csrf string, data []byte) (string, []byte) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if csrf != "" {
		mw.WriteField("csrf", csrf)
	}
	fw, _ := mw.CreateFormFile("file", "receipt.pdf")
	fw.Write(data)
	mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}

// copies reports the bytes the process allocated per operation, less
// what the benchmark's own set-up allocated (setup), as copies of the
// file: an upper bound of the copies held at once.
func copies(b *testing.B, before runtime.MemStats, setup ...uint64) {
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	for _, s := range setup {
		alloc -= s
	}
	b.ReportMetric(float64(alloc)/float64(b.N)/benchSize, "copies/op")
}

// BenchmarkUpload20MiB: a 20 MiB file through the upload page, the real
// handler (checks, CSRF, slow-body reader, type by content, SHA-256,
// AES-GCM, written to disk), against a plain net/http handler that reads
// the same multipart form and writes the file to disk.
func BenchmarkUpload20MiB(b *testing.B) {
	data := benchPayload()
	b.Run("countersign", func(b *testing.B) {
		e := newBenchFiles(b)
		ct, body := multipartOf(e.csrf, data)
		b.SetBytes(benchSize)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			e.clock.Advance(files.DefaultTTL + time.Minute) // the earlier uploads expire
			page, err := e.files.OpenPage(files.Principal{Account: e.account, Key: "k"}, "receipt", nil)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			resp := e.do(b, http.MethodPost, "/uploads/"+page.ID, ct, bytes.NewReader(body))
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusSeeOther {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
		b.StopTimer()
		copies(b, before)
	})
	b.Run("net-http", func(b *testing.B) {
		dir := b.TempDir()
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mr, err := r.MultipartReader()
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			part, err := mr.NextPart()
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			f, err := os.CreateTemp(dir, "up")
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			io.Copy(f, part)
			f.Close()
			os.Remove(f.Name())
			w.WriteHeader(http.StatusSeeOther)
		}))
		b.Cleanup(ts.Close)
		ct, body := multipartOf("", data)
		b.SetBytes(benchSize)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		b.ResetTimer()
		for range b.N {
			resp, err := http.Post(ts.URL, ct, bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		b.StopTimer()
		copies(b, before)
	})
}

// BenchmarkDownload20MiB: a kept 20 MiB file through /files/<id> (session,
// read from disk, AES-GCM opened, served as an attachment), against
// http.ServeFile of the same bytes from disk.
func BenchmarkDownload20MiB(b *testing.B) {
	data := benchPayload()
	b.Run("countersign", func(b *testing.B) {
		e := newBenchFiles(b)
		b.SetBytes(benchSize)
		var rec *files.Record
		var setup uint64
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		b.ResetTimer()
		for i := range b.N {
			if i%files.LinkDownloads == 0 {
				b.StopTimer()
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				e.clock.Advance(files.DefaultTTL + time.Minute)
				var err error
				if rec, err = e.files.PutDownload(files.Principal{Account: e.account, Key: "k"}, "r.pdf", "application/pdf", data); err != nil {
					b.Fatal(err)
				}
				runtime.ReadMemStats(&m1)
				setup += m1.TotalAlloc - m0.TotalAlloc
				runtime.GC()
				b.StartTimer()
			}
			resp := e.do(b, http.MethodGet, "/files/"+rec.ID, "", nil)
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || n != benchSize {
				b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
			}
		}
		b.StopTimer()
		copies(b, before, setup)
	})
	b.Run("net-http", func(b *testing.B) {
		file := filepath.Join(b.TempDir(), "r.pdf")
		os.WriteFile(file, data, 0o600)
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, file) }))
		b.Cleanup(ts.Close)
		b.SetBytes(benchSize)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		b.ResetTimer()
		for range b.N {
			resp, err := http.Get(ts.URL)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		b.StopTimer()
		copies(b, before)
	})
}
