package server

import (
	"crypto/hmac"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/files"
)

// uploadSlack is what a multipart body may carry besides the file: the
// boundaries, the part headers and the CSRF token.
const uploadSlack = 64 << 10

// BodyLimits bound how an upload body arrives (ADR 0008): within Total,
// never pausing longer than Stall, and, once Grace has passed, at MinRate
// bytes a second on average. A body that breaks one gets 408.
type BodyLimits struct {
	Total, Stall, Grace time.Duration
	MinRate             int64
}

// DefaultBodyLimits are ADR 0008's: 90 s, no 10 s pause, 16 KB/s after
// 10 s.
var DefaultBodyLimits = BodyLimits{Total: 90 * time.Second, Stall: 10 * time.Second, Grace: 10 * time.Second, MinRate: 16 << 10}

// uploadPage is the data of the upload page: only trusted values, none an
// agent wrote.
type uploadPage struct {
	pageBase
	ID, Reference, Purpose string
	Accept                 []string
	LimitMiB               int
	// Expires is when the page closes, before the upload; after it,
	// when the received file is removed.
	Expires time.Time
	// FileTTL is how long a received file is kept after its upload.
	FileTTL            string
	Filled             bool
	Name, MIME, SHA256 string
	Size               int64
	Asker              asker
	Error              string
}

// asker is who asked for an upload page: an agent key by its name, or a
// connection (an OAuth grant) by its client's name and its approver.
type asker struct {
	Key, Connection, AllowedBy string
}

// askerOf finds the agent key that owns an upload page in its account, or
// the connection that key is the grant of. A key that is gone is named as
// such; nothing of another account is read.
func (s *Server) askerOf(r *http.Request, account, keyID string) (asker, error) {
	grants, err := s.oauth.Grants(r.Context(), account)
	if err != nil {
		return asker{}, err
	}
	for _, g := range grants {
		if g.KeyID == keyID {
			return asker{Connection: g.ClientName, AllowedBy: g.ApproverName}, nil
		}
	}
	keys, err := s.cfg.Store.AgentKeys(r.Context(), account)
	if err != nil {
		return asker{}, err
	}
	for _, k := range keys {
		if k.ID == keyID {
			return asker{Key: k.Name}, nil
		}
	}
	return asker{}, nil
}

// ttlText says a duration as a person would: "1 hour", "30 minutes".
func ttlText(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		if d == time.Hour {
			return "1 hour"
		}
		return fmt.Sprintf("%d hours", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		if d == time.Minute {
			return "1 minute"
		}
		return fmt.Sprintf("%d minutes", d/time.Minute)
	}
	return d.String()
}

func (s *Server) filesOn() error {
	if s.cfg.Files == nil {
		return countersign.Errorf(countersign.ENOTFOUND, "file transfer is not configured on this server")
	}
	return nil
}

// uploadForm shows an upload page to a session of the page's account.
func (s *Server) uploadForm(w http.ResponseWriter, r *http.Request, b *browser) error {
	if err := s.filesOn(); err != nil {
		return err
	}
	rec, err := s.cfg.Files.Page(b.session.AccountID, r.PathValue("id"))
	if err != nil {
		return err
	}
	return s.renderUpload(w, r, b, http.StatusOK, rec, "")
}

func (s *Server) renderUpload(w http.ResponseWriter, r *http.Request, b *browser, status int, rec *files.Record, msg string) error {
	base, err := s.base(r.Context(), b)
	if err != nil {
		return err
	}
	who, err := s.askerOf(r, b.session.AccountID, rec.Owner.Key)
	if err != nil {
		return err
	}
	return s.render(w, status, "upload", uploadPage{pageBase: base, ID: rec.ID, Reference: rec.Reference, Purpose: rec.Purpose,
		Accept: rec.Accept, LimitMiB: files.MaxUpload >> 20, Expires: rec.Expires, FileTTL: ttlText(s.cfg.Files.TTL()), Filled: rec.Filled,
		Name: rec.Name, MIME: rec.MIME, SHA256: rec.SHA256, Size: rec.Size, Asker: who, Error: msg})
}

// upload takes the file of an upload page. Before a byte of the body is
// read it checks the host, the origin, the session, that the account has
// the page open, the declared length and a free slot; then it reads the
// CSRF token, which the form sends first, and the file, under the body
// limits.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	setPageHeaders(w)
	err := s.checkHost(r)
	if err == nil {
		err = s.checkOrigin(r)
	}
	if err == nil {
		err = s.takeUpload(w, r)
	}
	if err != nil {
		if countersign.ErrorCode(err) == countersign.ETIMEOUT || countersign.ErrorCode(err) == countersign.ETOOLARGE {
			// The rest of the body is not read: the connection cannot
			// carry another request.
			w.Header().Set("Connection", "close")
		}
		s.writePageError(w, r, err)
	}
}

func (s *Server) takeUpload(w http.ResponseWriter, r *http.Request) error {
	b, err := s.browserOf(r.Context(), r)
	if err != nil {
		return err
	}
	if b == nil {
		return countersign.Errorf(countersign.EUNAUTHORIZED, "Your session has ended. Sign in again, open the upload page and upload the file again.")
	}
	if err := s.filesOn(); err != nil {
		return err
	}
	if !b.approver.Role.Decides() {
		// Giving an agent a file acts on its request, as deciding does.
		return errViewerUpload()
	}
	limit := int64(files.MaxUpload + uploadSlack)
	if r.ContentLength < 0 {
		return countersign.Errorf(countersign.EINVALID, "The upload did not say how large it is (Content-Length). Upload it from the page.")
	}
	up, err := s.cfg.Files.BeginUpload(b.session.AccountID, r.PathValue("id"), r.ContentLength, limit)
	if err != nil {
		return err
	}
	defer up.Release()
	body := newSlowBody(w, http.MaxBytesReader(w, r.Body, limit), s.bodyLimits())
	name, err := s.readUpload(r, body, b.id, up)
	if err != nil {
		return err
	}
	rec, err := up.Close(name)
	if err != nil {
		if code := countersign.ErrorCode(err); code == countersign.EUNSUPPORTED || code == countersign.EINVALID {
			page, perr := s.cfg.Files.Page(b.session.AccountID, r.PathValue("id"))
			if perr == nil {
				return s.renderUpload(w, r, b, http.StatusUnsupportedMediaType, page, countersign.ErrorMessage(err))
			}
		}
		return err
	}
	if err := s.cfg.Files.AuditUploaded(r.Context(), rec, b.approver.Username); err != nil {
		return err
	}
	http.Redirect(w, r, "/uploads/"+rec.ID, http.StatusSeeOther)
	return nil
}

// errViewerUpload is the refusal of an upload from a viewer's session.
// Nothing changes; the page stays open for an approver.
func errViewerUpload() error {
	return countersign.Errorf(countersign.EFORBIDDEN, "your role in this account is viewer: you may see its upload pages, not upload files to them; an admin of the account can make you an approver")
}

func (s *Server) bodyLimits() BodyLimits {
	if s.cfg.UploadLimits.Total > 0 {
		return s.cfg.UploadLimits
	}
	return DefaultBodyLimits
}

// readUpload reads the form: first the CSRF token, then one file, which
// streams into the upload, sealed as it arrives.
func (s *Server) readUpload(r *http.Request, body io.Reader, sessionID string, up *files.Upload) (string, error) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return "", countersign.Errorf(countersign.EUNSUPPORTED, "Upload the file from the upload page's form.")
	}
	mr := multipart.NewReader(body, params["boundary"])
	part, err := mr.NextPart()
	if err != nil {
		return "", bodyError(err)
	}
	token, err := io.ReadAll(io.LimitReader(part, 256))
	if err != nil {
		return "", bodyError(err)
	}
	if part.FormName() != "csrf" || !s.csrfMatches(string(token), sessionID) {
		return "", countersign.Errorf(countersign.EFORBIDDEN, "This form has expired or did not come from your session. Reload the page and try again.")
	}
	part, err = mr.NextPart()
	if err != nil {
		return "", bodyError(err)
	}
	if part.FormName() != "file" {
		return "", countersign.Errorf(countersign.EINVALID, "The form holds no file. Choose a file and upload it again.")
	}
	buf := make([]byte, chunkRead)
	for {
		n, rerr := part.Read(buf)
		if n > 0 {
			if _, err := up.Write(buf[:n]); err != nil {
				return "", err
			}
		}
		if rerr == io.EOF {
			return part.FileName(), nil
		} else if rerr != nil {
			return "", bodyError(rerr)
		}
	}
}

// chunkRead is how much of an upload is read at once.
const chunkRead = 64 << 10

// bodyError is a failure to read an upload body as the browser should
// read it.
func bodyError(err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, errSlowBody):
		return countersign.Errorf(countersign.ETIMEOUT, "The upload came in too slowly (it must finish within 90 seconds, never pause for 10 seconds, and average 16 KB/s). Try again on a faster connection.")
	case errors.As(err, &mbe):
		return countersign.Errorf(countersign.ETOOLARGE, "The file is larger than %d MiB, the most an upload takes.", files.MaxUpload>>20)
	}
	return countersign.Errorf(countersign.EINVALID, "The upload was cut off or is not a form. Upload the file again from the page.")
}

// setPageHeaders sets the security headers of every page.
func setPageHeaders(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", pageCSP)
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// uploadIDs finds the uploads a request's arguments name ("upload:<id>").
func uploadIDs(args string) []string {
	var ids []string
	for rest := args; ; {
		i := strings.Index(rest, `"upload:`)
		if i < 0 {
			return ids
		}
		rest = rest[i+len(`"upload:`):]
		j := strings.IndexByte(rest, '"')
		if j < 0 {
			return ids
		}
		ids = append(ids, rest[:j])
		rest = rest[j:]
	}
}

// csrfMatches compares a form's token with the session's in constant time.
func (s *Server) csrfMatches(got, sessionID string) bool {
	return got != "" && sessionID != "" && hmac.Equal([]byte(got), []byte(s.csrfToken(sessionID)))
}

// fileView is an upload as a request's page shows it: what the approver
// checks before deciding, and a way to download it.
type fileView struct {
	Reference, MIME, SHA256, URL string
	Size                         int64
}

// filesOf finds the uploads of the request's account that its arguments
// name and that the call carries: the receipt behind the voucher. The
// gateway writes the facts of the uploads in its file arguments into the
// preview; an upload named anywhere else (a note, an argument that takes
// no file, another key's upload) is not the call's file and is not shown
// as one.
func (s *Server) filesOf(req *countersign.Request) []fileView {
	if s.cfg.Files == nil {
		return nil
	}
	// The gateway's section follows an empty line, which the arguments
	// it shows above (indented JSON, quoted texts) never hold.
	_, carried, _ := strings.Cut(req.Preview, "\n\nFiles uploaded by the user:\n")
	var out []fileView
	for _, id := range uploadIDs(string(req.Arguments)) {
		rec, err := s.cfg.Files.Lookup(req.AccountID, id)
		if err != nil || !strings.Contains(carried, fmt.Sprintf(": upload %s, %s, %d bytes, SHA-256 %s", rec.Reference, rec.MIME, rec.Size, rec.SHA256)) {
			continue
		}
		out = append(out, fileView{Reference: rec.Reference, MIME: rec.MIME, SHA256: rec.SHA256, Size: rec.Size, URL: "/files/" + rec.ID})
	}
	return out
}
