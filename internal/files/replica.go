package files

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/seal"
)

// Locator lets replicas on one database find the replica that holds a
// record's bytes, which stay where they were taken, sealed under that
// process's key. A record's id carries the holder's internal URL, sealed
// with AES-GCM under a key every replica reads from the database (the
// "files-replica" server key): the id is opaque, and a forged or changed
// one opens as no replica. Another replica passes a browser's request for
// the record on to the holder, which checks the session as for its own;
// for the gateway's uploads it asks the holder's internal route, with an
// HMAC under the same key and the agent's own credential, which the
// holder authenticates again. A copy of the database holds no bytes and no
// session or agent secret, so it opens no file.
type Locator struct {
	idKey  *seal.Key
	macKey []byte
	self   string
	client *http.Client
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewLocator returns the locator of the replica answering at self (its
// internal URL, such as http://10.0.0.5:8080), under the shared key.
func NewLocator(key []byte, self string) (*Locator, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("the files replica key must have 32 bytes")
	}
	u, err := url.Parse(self)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
		return nil, fmt.Errorf("the replica URL %q (COUNTERSIGN_REPLICA_URL) must be http(s)://host:port, where other replicas reach this one", self)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("countersign files id"))
	idKey, err := seal.New(mac.Sum(nil))
	if err != nil {
		return nil, err
	}
	mac = hmac.New(sha256.New, key)
	mac.Write([]byte("countersign files replica request"))
	return &Locator{idKey: idKey, macKey: mac.Sum(nil), self: self, client: &http.Client{Timeout: 2 * time.Minute}}, nil
}

// newID is a record id: 128 random bits and the holder's URL, sealed.
func (l *Locator) newID() string {
	plain := make([]byte, 16, 16+len(l.self))
	rand.Read(plain)
	plain = append(plain, l.self...)
	return idEncoding.EncodeToString(l.idKey.Seal(plain, []byte("id")))
}

// where returns the URL of the replica that holds a record, and false for
// an id no replica made.
func (l *Locator) where(id string) (string, bool) {
	if len(id) > 400 {
		return "", false
	}
	raw, err := idEncoding.DecodeString(id)
	if err != nil || len(raw) < seal.Overhead+16 {
		return "", false
	}
	plain, err := l.idKey.Open(raw, []byte("id"))
	if err != nil || len(plain) < 16 {
		return "", false
	}
	return string(plain[16:]), true
}

// Remote returns the internal URL of the other replica that holds a
// record; false when it is this replica's, or no replica's.
func (s *Store) Remote(id string) (string, bool) {
	if s.cfg.Locator == nil {
		return "", false
	}
	at, ok := s.cfg.Locator.where(id)
	if !ok || at == s.cfg.Locator.self {
		return "", false
	}
	return at, true
}

func (s *Store) newID() string {
	if s.cfg.Locator != nil {
		return s.cfg.Locator.newID()
	}
	return countersign.NewID("")
}

// Headers of the internal route.
const (
	hdrTime   = "X-Countersign-Replica-Time"
	hdrMAC    = "X-Countersign-Replica-Mac"
	hdrRecord = "X-Countersign-Record"
)

func (l *Locator) mac(id, at, authorization string) string {
	m := hmac.New(sha256.New, l.macKey)
	sum := sha256.Sum256([]byte(authorization))
	fmt.Fprintf(m, "upload\x00%s\x00%s\x00%x", id, at, sum)
	return hex.EncodeToString(m.Sum(nil))
}

// answerMAC authenticates the holder's answer to one request (named by
// that request's MAC): the record, whose SHA-256 the bytes must match, so
// that nobody between the replicas can swap the file an approval covers.
func (l *Locator) answerMAC(requestMAC, record string) string {
	m := hmac.New(sha256.New, l.macKey)
	fmt.Fprintf(m, "upload answer\x00%s\x00%s", requestMAC, record)
	return hex.EncodeToString(m.Sum(nil))
}

// remoteRecord is a record as the internal route sends it.
type remoteRecord struct {
	Reference, Purpose, Name, MIME, SHA256 string
	Size                                   int64
	Expires                                time.Time
}

// FetchUpload asks the replica holding an upload for it, with the agent's
// own Authorization header, which that replica authenticates.
func (s *Store) FetchUpload(ctx context.Context, p Principal, id, authorization string) (*Record, []byte, error) {
	at, ok := s.Remote(id)
	if !ok {
		return nil, nil, unknown()
	}
	l := s.cfg.Locator
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, at+"/internal/uploads/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, nil, unknown()
	}
	now := strconv.FormatInt(s.cfg.Clock.Now().Unix(), 10)
	req.Header.Set("Authorization", authorization)
	req.Header.Set(hdrTime, now)
	req.Header.Set(hdrMAC, l.mac(id, now, authorization))
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, nil, countersign.Errorf(countersign.EUNAVAILABLE, "the server replica that holds this upload cannot be reached; try again in a minute")
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusConflict:
		return nil, nil, countersign.Errorf(countersign.ECONFLICT, "nothing has been uploaded to this upload page yet: ask the user to open the page and upload the file, then call again")
	default:
		return nil, nil, unknown()
	}
	var rr remoteRecord
	head := resp.Header.Get(hdrRecord)
	if err := json.Unmarshal([]byte(head), &rr); err != nil || rr.Size > MaxUpload {
		return nil, nil, unknown()
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxUpload+1))
	sum := sha256.Sum256(data)
	if err != nil || int64(len(data)) != rr.Size || hex.EncodeToString(sum[:]) != rr.SHA256 ||
		!hmac.Equal([]byte(resp.Header.Get(hdrMAC)), []byte(l.answerMAC(req.Header.Get(hdrMAC), head))) {
		return nil, nil, countersign.Errorf(countersign.EUNAVAILABLE, "the upload could not be read from the replica that holds it; try again")
	}
	rec := &Record{ID: id, Reference: rr.Reference, Owner: p, Kind: KindUpload, Purpose: rr.Purpose, Filled: true,
		Name: cleanName(rr.Name), MIME: rr.MIME, Size: rr.Size, SHA256: rr.SHA256, Expires: rr.Expires}
	return rec, data, nil
}

// CheckReplica checks that a request of the internal route comes from a
// replica: a fresh time and the HMAC over the id, the time and the
// agent's credential.
func (s *Store) CheckReplica(r *http.Request, id string) bool {
	l := s.cfg.Locator
	if l == nil {
		return false
	}
	at := r.Header.Get(hdrTime)
	sec, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return false
	}
	if d := s.cfg.Clock.Now().Sub(time.Unix(sec, 0)); d > time.Minute || d < -time.Minute {
		return false
	}
	want := l.mac(id, at, r.Header.Get("Authorization"))
	return hmac.Equal([]byte(strings.ToLower(r.Header.Get(hdrMAC))), []byte(want))
}

// ServeUpload answers the internal route's request r (which CheckReplica
// passed) with an upload and its record, under the replicas' HMAC.
func (s *Store) ServeUpload(w http.ResponseWriter, r *http.Request, rec *Record, data []byte) {
	b, _ := json.Marshal(remoteRecord{Reference: rec.Reference, Purpose: rec.Purpose, Name: rec.Name, MIME: rec.MIME,
		SHA256: rec.SHA256, Size: rec.Size, Expires: rec.Expires})
	w.Header().Set(hdrRecord, string(b))
	w.Header().Set(hdrMAC, s.cfg.Locator.answerMAC(r.Header.Get(hdrMAC), string(b)))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
}
