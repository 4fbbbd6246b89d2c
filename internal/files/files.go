// Package files keeps the short-lived files of ADR 0008: the upload pages
// an agent asks for, the files a human uploads there, and the files an
// upstream MCP server returned, kept for download. Records live in the
// process only; the bytes are sealed with AES-256-GCM under a key drawn at
// start and never written down, so a restart voids everything and a copy
// of the disk opens nothing.
package files

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign"
)

// Bounds of ADR 0008.
const (
	// MaxUpload is the largest file an upload page takes.
	MaxUpload = 20 << 20
	// PageTTL is how long an upload page waits for its file.
	PageTTL = 15 * time.Minute
	// DefaultTTL is how long an upload or a download link lives.
	DefaultTTL = 30 * time.Minute
	// MaxPages is how many upload pages an account may have open at once.
	MaxPages = 5
	// MaxRecords is how many uploads and links an account may hold at once.
	MaxRecords = 10
	// LinkDownloads is how many times a record may be downloaded.
	LinkDownloads = 5
	// MaxUploading is how many upload bodies the server reads at once; an
	// account reads one at a time.
	MaxUploading = 2
	// DefaultMaxBytesDisk and DefaultMaxBytesMemory are the space of all
	// files with and without a folder for them.
	DefaultMaxBytesDisk   = 256 << 20
	DefaultMaxBytesMemory = 64 << 20
)

// Principal is who asked for an upload or got a link: an agent key (or an
// OAuth grant, which owns a key) of an account. Only the same principal
// may use an upload.
type Principal struct {
	Account string
	Key     string
}

// Kind tells an upload from a download.
type Kind string

// The kinds of record.
const (
	KindUpload   Kind = "upload"
	KindDownload Kind = "download"
)

// Record is one upload page, upload or download link. Its fields are
// copies; the store keeps its own.
type Record struct {
	ID        string
	Reference string // as shown: K7F-2QX
	Owner     Principal
	Kind      Kind
	Purpose   string   // uploads: what the file is for
	Accept    []string // uploads: the media types the page takes; empty: any
	// Filled reports whether an upload page has received its file;
	// downloads are always filled.
	Filled    bool
	Name      string // cleaned, never a path
	MIME      string // decided by content
	Size      int64
	SHA256    string // hex
	Created   time.Time
	Expires   time.Time
	Downloads int
}

// Config is what a Store needs.
type Config struct {
	// Dir holds the sealed bytes; "": memory. It is emptied when the store
	// opens, so it must be a folder of the store alone.
	Dir string
	// MaxBytes is the space of every account's files together (0: the
	// default for Dir). It must hold two uploads.
	MaxBytes int64
	// TTL is how long uploads and links live (0: DefaultTTL).
	TTL   time.Duration
	Clock countersign.Clock
	Log   *slog.Logger
	// Locator, with several replicas on one database, names records so
	// that every replica finds their holder (replica.go); nil: one process.
	Locator *Locator
	// Audit receives the audit entries of file transfer (audit.go); nil:
	// none are written.
	Audit Auditor
}

// Store holds the records and their sealed bytes.
type Store struct {
	cfg   Config
	box   *sealer
	blobs blobs

	mu        sync.Mutex
	records   map[string]*entry // by id
	accounts  map[string]*usage
	uploading int
}

type entry struct {
	Record
	reserved int64 // bytes held for an upload body being read
}

// usage is what one account holds.
type usage struct {
	pages, records int
	bytes          int64 // stored and reserved
	uploading      bool
}

// Open returns an empty store. With a folder, the folder is emptied first:
// nothing of an earlier process can be opened anyway, its key is gone.
func Open(cfg Config) (*Store, error) {
	if cfg.Clock == nil {
		cfg.Clock = countersign.SystemClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytesMemory
		if cfg.Dir != "" {
			cfg.MaxBytes = DefaultMaxBytesDisk
		}
	}
	if cfg.MaxBytes < 2*MaxUpload {
		return nil, fmt.Errorf("the file space (COUNTERSIGN_FILES_MAX_MB) must hold two uploads of %d MiB: set it to at least %d", MaxUpload>>20, 2*MaxUpload>>20)
	}
	box, err := newSealer()
	if err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, box: box, records: map[string]*entry{}, accounts: map[string]*usage{}}
	if cfg.Dir == "" {
		s.blobs = &memBlobs{m: map[string][]byte{}}
	} else if s.blobs, err = openDiskBlobs(cfg.Dir); err != nil {
		return nil, err
	}
	return s, nil
}

// PerAccount is the space one account may fill: a quarter of the whole,
// at least one upload and at most half.
func (s *Store) PerAccount() int64 {
	return min(max(s.cfg.MaxBytes/4, MaxUpload), s.cfg.MaxBytes/2)
}

// MaxBytes is the space of all files together.
func (s *Store) MaxBytes() int64 { return s.cfg.MaxBytes }

// TTL is how long uploads and links live.
func (s *Store) TTL() time.Duration { return s.cfg.TTL }

// Crowding is how many accounts, each at its share, fill the whole space:
// the startup warning of ADR 0008 names it when it is small.
func (s *Store) Crowding() int64 {
	return s.cfg.MaxBytes / s.PerAccount()
}

// OpenPage opens an upload page for the principal. ELIMIT when the account
// has MaxPages open or holds MaxRecords already.
func (s *Store) OpenPage(p Principal, purpose string, accept []string) (*Record, error) {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now)
	u := s.usage(p.Account)
	if u.pages >= MaxPages {
		return nil, countersign.Errorf(countersign.ELIMIT, "this account has %d upload pages open already: use one of them, or wait until one expires (%s after it was opened)", MaxPages, PageTTL)
	}
	if u.records+u.pages >= MaxRecords {
		return nil, s.fullRecords()
	}
	e := &entry{Record: Record{ID: s.newID(), Reference: countersign.FormatReference(countersign.NewReference()),
		Owner: p, Kind: KindUpload, Purpose: purpose, Accept: append([]string(nil), accept...), Created: now, Expires: now.Add(PageTTL)}}
	s.records[e.ID] = e
	u.pages++
	s.cfg.Log.Info("upload page opened", "reference", e.Reference, "purpose", purpose)
	return e.copy(), nil
}

func (s *Store) fullRecords() error {
	return countersign.Errorf(countersign.ELIMIT, "this account holds %d files and links already, the most it may: "+
		"use them, or wait until they expire (%s after they were made), then ask again", MaxRecords, s.cfg.TTL)
}

// Page returns an upload page (filled or not) by account: every session
// of the account may open it. ENOTFOUND for an unknown, expired or other
// account's id.
func (s *Store) Page(account, id string) (*Record, error) {
	e, err := s.get(id, func(e *entry) bool { return e.Kind == KindUpload && e.Owner.Account == account })
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Lookup returns a filled record of the account, without counting a
// download. ENOTFOUND as Page.
func (s *Store) Lookup(account, id string) (*Record, error) {
	return s.get(id, func(e *entry) bool { return e.Filled && e.Owner.Account == account })
}

// Upload returns the filled upload of the principal. Another principal,
// even of the same account, gets the answer for an unknown id; the owner
// of a page that has no file yet gets ECONFLICT.
func (s *Store) Upload(p Principal, id string) (*Record, error) {
	rec, err := s.get(id, func(e *entry) bool { return e.Kind == KindUpload && e.Owner == p })
	if err != nil {
		return nil, err
	}
	if !rec.Filled {
		return nil, countersign.Errorf(countersign.ECONFLICT, "nothing has been uploaded to upload page %s yet: ask the user to open the page and upload the file, then call again", rec.Reference)
	}
	return rec, nil
}

func (s *Store) get(id string, mine func(*entry) bool) (*Record, error) {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now)
	e, ok := s.records[id]
	if !ok || !mine(e) {
		return nil, unknown()
	}
	return e.copy(), nil
}

func unknown() error {
	return countersign.Errorf(countersign.ENOTFOUND, "there is no such file: it may have expired, or a restart of the server voided it")
}

// Read returns the plain bytes of a filled record.
func (s *Store) Read(rec *Record) ([]byte, error) {
	r, err := s.Open(rec)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data := make([]byte, 0, rec.Size)
	buf := bytes.NewBuffer(data)
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Open streams the plain bytes of a filled record, opened chunk by chunk:
// a file is never held whole. A blob that fails to open ends the stream
// with an error.
func (s *Store) Open(rec *Record) (io.ReadCloser, error) {
	src, err := s.blobs.open(rec.ID)
	if err != nil {
		return nil, unknown()
	}
	return s.box.reader(src, ad(rec), rec.Size)
}

// Fetch returns a filled record of the account and a stream of its bytes,
// counting one download. ELIMIT once a record served LinkDownloads.
func (s *Store) Fetch(account, id string) (*Record, io.ReadCloser, error) {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	s.sweepLocked(now)
	e, ok := s.records[id]
	if !ok || !e.Filled || e.Owner.Account != account {
		s.mu.Unlock()
		return nil, nil, unknown()
	}
	if e.Downloads >= LinkDownloads {
		s.mu.Unlock()
		return nil, nil, countersign.Errorf(countersign.ELIMIT, "this file has been downloaded %d times, the most a link serves: ask the agent for a new one", LinkDownloads)
	}
	e.Downloads++
	rec := e.copy()
	s.mu.Unlock()
	r, err := s.Open(rec)
	if err != nil {
		return nil, nil, err
	}
	s.cfg.Log.Info("file downloaded", "reference", rec.Reference, "kind", rec.MIME, "size", rec.Size, "sha256", rec.SHA256)
	return rec, r, nil
}

// sweepLocked drops what has expired, and its bytes.
func (s *Store) sweepLocked(now time.Time) {
	for id, e := range s.records {
		if e.reserved > 0 || !now.After(e.Expires) {
			continue
		}
		s.dropLocked(id, e)
	}
}

func (s *Store) dropLocked(id string, e *entry) {
	delete(s.records, id)
	u := s.usage(e.Owner.Account)
	if e.Filled {
		u.records--
		u.bytes -= e.Size
		s.blobs.del(id)
	} else {
		u.pages--
	}
	if u.pages == 0 && u.records == 0 && u.bytes == 0 && !u.uploading {
		delete(s.accounts, e.Owner.Account)
	}
}

func (s *Store) usage(account string) *usage {
	u, ok := s.accounts[account]
	if !ok {
		u = &usage{}
		s.accounts[account] = u
	}
	return u
}

// roomLocked checks that n more bytes fit for the account: within its
// share, within the whole, and, unless the account holds nothing, leaving
// room for one upload of an account that holds nothing.
func (s *Store) roomLocked(account string, n int64) error {
	u := s.usage(account)
	total := int64(0)
	for _, a := range s.accounts {
		total += a.bytes
	}
	if u.bytes+n > s.PerAccount() {
		return countersign.Errorf(countersign.ELIMIT, "this account's files would take more than its %d MiB: wait until its uploads and links expire (%s after they were made), then try again", s.PerAccount()>>20, s.cfg.TTL)
	}
	free := s.cfg.MaxBytes - total
	if u.bytes > 0 || u.records > 0 {
		free -= MaxUpload
	}
	if n > free {
		return countersign.Errorf(countersign.ELIMIT, "the server's space for files is full: try again in a few minutes, when files of others have expired")
	}
	return nil
}

func (e *entry) copy() *Record {
	r := e.Record
	r.Accept = append([]string(nil), e.Accept...)
	return &r
}

// ad is the additional data a record's bytes are sealed with: its id,
// account and kind, so that no blob opens as another's.
func ad(r *Record) []byte {
	return []byte(r.ID + "\x00" + r.Owner.Account + "\x00" + string(r.Kind))
}

// blobName is the name of a record's bytes on disk: a hash of its id, so
// that a listing of the folder shows no id.
func blobName(id string) string {
	sum := sha256.Sum256([]byte("countersign-blob\x00" + id))
	return hex.EncodeToString(sum[:16])
}

// cleanName makes an uploaded file's name safe to show and to offer as a
// download name: the last element only, no control or quoting
// characters, at most 100 characters and 200 bytes. It is never a path,
// only a file's name.
func cleanName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	var b strings.Builder
	n := 0
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || strings.ContainsRune("\"';:*?<>|`$", r) ||
			(r >= 0x200b && r <= 0x200f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0xfeff || r == 0xfffd {
			continue
		}
		// At most 100 characters, and 200 bytes: the gateway's path mode
		// makes a file of this name, and file systems take 255 bytes.
		if n++; n > 100 || b.Len()+utf8.RuneLen(r) > 200 {
			break
		}
		b.WriteRune(r)
	}
	out := strings.Trim(strings.TrimSpace(b.String()), ".")
	if out == "" {
		return "file"
	}
	return out
}
