package files

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strings"

	"github.com/countersign/countersign"
	"github.com/gabriel-vasile/mimetype"
)

// Upload is an upload body being read: it holds one of the server's
// upload slots, the account's one, and the space the body declared, until
// Close or Release. Its bytes are sealed as they are written.
type Upload struct {
	s        *Store
	id       string
	account  string
	reserved int64
	done     bool

	w    *blobWriter
	hash hash.Hash
	head []byte // the first bytes, which decide the kind
	size int64
	err  error
}

// headLen is how much of a file decides its kind (mimetype's own limit).
const headLen = 3072

// BeginUpload checks, before a body is read, that the account has this
// page open and waiting for a file, that the declared length is within
// limit, that a slot is free and that the space fits. ENOTFOUND for
// another account's or an unknown page; ECONFLICT for a page that has its
// file; ETOOLARGE; ELIMIT.
func (s *Store) BeginUpload(account, id string, declared, limit int64) (*Upload, error) {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now)
	e, ok := s.records[id]
	if !ok || e.Kind != KindUpload || e.Owner.Account != account {
		return nil, unknown()
	}
	if e.Filled || e.reserved > 0 {
		return nil, countersign.Errorf(countersign.ECONFLICT, "this upload page has its file already; ask the agent for a new page to upload another")
	}
	if declared < 0 {
		return nil, countersign.Errorf(countersign.EINVALID, "the upload must declare its length (Content-Length)")
	}
	if declared > limit {
		return nil, countersign.Errorf(countersign.ETOOLARGE, "the file is larger than %d MiB, the most an upload takes", MaxUpload>>20)
	}
	u := s.usage(account)
	if u.uploading {
		return nil, &countersign.Error{Code: countersign.ELIMIT, Message: "another upload of this account is in progress: wait until it is done, then try again", RetryAfter: 10e9}
	}
	if s.uploading >= MaxUploading {
		return nil, &countersign.Error{Code: countersign.ELIMIT, Message: "the server is receiving other uploads: try again in a minute", RetryAfter: 30e9}
	}
	if u.records >= MaxRecords {
		return nil, s.fullRecords()
	}
	n := min(declared, MaxUpload)
	if err := s.roomLocked(account, n); err != nil {
		return nil, err
	}
	k, err := s.blobs.create(id, n)
	if err != nil {
		return nil, countersign.Errorf(countersign.EINTERNAL, "store a file: %v", err)
	}
	w, err := s.box.writer(ad(&e.Record), k)
	if err != nil {
		k.abort()
		return nil, countersign.Errorf(countersign.EINTERNAL, "store a file: %v", err)
	}
	u.uploading, u.bytes, e.reserved = true, u.bytes+n, n
	s.uploading++
	return &Upload{s: s, id: id, account: account, reserved: n, w: w, hash: sha256.New()}, nil
}

// Write seals more of the file. ETOOLARGE beyond what the body declared or
// MaxUpload.
func (up *Upload) Write(p []byte) (int, error) {
	if up.err != nil {
		return 0, up.err
	}
	if up.size+int64(len(p)) > up.reserved {
		up.err = countersign.Errorf(countersign.ETOOLARGE, "the file is larger than it said or than %d MiB", MaxUpload>>20)
		return 0, up.err
	}
	if len(up.head) < headLen {
		up.head = append(up.head, p[:min(len(p), headLen-len(up.head))]...)
	}
	up.hash.Write(p)
	up.size += int64(len(p))
	if _, err := up.w.Write(p); err != nil {
		up.err = countersign.Errorf(countersign.EINTERNAL, "store a file: %v", err)
		return 0, up.err
	}
	return len(p), nil
}

// Release gives the slot and the space back, and drops a file not kept;
// after Close it does nothing.
func (up *Upload) Release() {
	s := up.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if up.done {
		return
	}
	up.done = true
	up.w.sink.abort()
	s.uploading--
	u := s.usage(up.account)
	u.uploading = false
	u.bytes -= up.reserved
	if e, ok := s.records[up.id]; ok {
		e.reserved = 0
	}
}

// Finish writes data and closes the upload.
func (up *Upload) Finish(name string, data []byte) (*Record, error) {
	if _, err := up.Write(data); err != nil {
		up.Release()
		return nil, err
	}
	return up.Close(name)
}

// Close keeps the file written: its kind decided by content (which the
// page's kinds must accept), its name cleaned. EUNSUPPORTED for a kind the
// page does not take, EINVALID for an empty file; the page stays open for
// another try.
func (up *Upload) Close(name string) (*Record, error) {
	defer up.Release()
	s := up.s
	if up.err != nil {
		return nil, up.err
	}
	if up.size == 0 {
		return nil, countersign.Errorf(countersign.EINVALID, "the file is empty: choose the file again")
	}
	s.mu.Lock()
	e, ok := s.records[up.id]
	var accept []string
	if ok {
		accept = e.Accept
	}
	s.mu.Unlock()
	if !ok {
		return nil, unknown()
	}
	kind := mimetype.Detect(up.head)
	if !accepts(kind, accept) {
		return nil, countersign.Errorf(countersign.EUNSUPPORTED, "this is a file of kind %s, which this page does not take: it takes %s", kind.String(), strings.Join(accept, ", "))
	}
	if err := up.w.close(); err != nil {
		return nil, countersign.Errorf(countersign.EINTERNAL, "store a file: %v", err)
	}
	size, sum := up.size, hex.EncodeToString(up.hash.Sum(nil))
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Clock.Now()
	e, ok = s.records[up.id]
	if !ok {
		s.blobs.del(up.id)
		return nil, unknown()
	}
	u := s.usage(up.account)
	up.done = true
	s.uploading--
	u.uploading = false
	u.bytes += size - up.reserved
	u.pages--
	u.records++
	e.reserved = 0
	e.Filled, e.Name, e.MIME, e.Size, e.SHA256 = true, cleanName(name), kind.String(), size, sum
	e.Expires = now.Add(s.cfg.TTL)
	s.cfg.Log.Info("file uploaded", "reference", e.Reference, "kind", e.MIME, "size", e.Size, "sha256", e.SHA256)
	return e.copy(), nil
}

// accepts reports whether a detected kind is one of the page's: a type
// such as application/pdf (or one of its aliases and parents), or a
// family such as image/*.
func accepts(kind *mimetype.MIME, accept []string) bool {
	if len(accept) == 0 {
		return true
	}
	for _, a := range accept {
		if fam, ok := strings.CutSuffix(a, "/*"); ok {
			if strings.HasPrefix(kind.String(), fam+"/") {
				return true
			}
			continue
		}
		for m := kind; m != nil; m = m.Parent() {
			if m.Is(a) {
				return true
			}
		}
	}
	return false
}

// PutDownload keeps a file an upstream returned, for the principal's
// account to download. ELIMIT when the
// account or the server has no room: nothing is evicted.
func (s *Store) PutDownload(p Principal, name, mime string, data []byte) (*Record, error) {
	now := s.cfg.Clock.Now()
	size := int64(len(data))
	if mime == "" {
		mime = mimetype.Detect(data).String()
	}
	sum := sha256.Sum256(data)
	s.mu.Lock()
	s.sweepLocked(now)
	u := s.usage(p.Account)
	if u.records+u.pages >= MaxRecords {
		s.mu.Unlock()
		return nil, s.fullRecords()
	}
	if err := s.roomLocked(p.Account, size); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	e := &entry{Record: Record{ID: s.newID(), Reference: countersign.FormatReference(countersign.NewReference()),
		Owner: p, Kind: KindDownload, Filled: true, Name: cleanName(name), MIME: mime, Size: size,
		SHA256: hex.EncodeToString(sum[:]), Created: now, Expires: now.Add(s.cfg.TTL)}}
	// Held as a reservation while sealed and written, outside the lock.
	e.reserved = size
	u.bytes += size
	u.records++
	s.records[e.ID] = e
	s.mu.Unlock()
	err := s.keep(e.copy(), data)
	s.mu.Lock()
	defer s.mu.Unlock()
	e.reserved = 0
	if err != nil {
		s.dropLocked(e.ID, e)
		return nil, err
	}
	s.cfg.Log.Info("file kept for download", "reference", e.Reference, "kind", e.MIME, "size", e.Size, "sha256", e.SHA256)
	return e.copy(), nil
}

// keep seals and stores a record's bytes.
func (s *Store) keep(rec *Record, data []byte) error {
	k, err := s.blobs.create(rec.ID, int64(len(data)))
	if err == nil {
		var w *blobWriter
		if w, err = s.box.writer(ad(rec), k); err == nil {
			if _, err = w.Write(data); err == nil {
				err = w.close()
			} else {
				k.abort()
			}
		} else {
			k.abort()
		}
	}
	if err != nil {
		return countersign.Errorf(countersign.EINTERNAL, "store a file: %v", err)
	}
	return nil
}
