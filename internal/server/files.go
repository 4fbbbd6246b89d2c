package server

import (
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/files"
)

// fileCSP lets a served file do nothing on the server's origin, even if a
// browser renders it against the attachment's wish.
const fileCSP = "default-src 'none'; sandbox"

// download serves a kept file to a session of its account: always as an
// attachment, sandboxed, never framed. It reads only what is kept and
// never calls an upstream. A link serves LinkDownloads times.
func (s *Server) download(w http.ResponseWriter, r *http.Request, b *browser) error {
	if err := s.filesOn(); err != nil {
		return err
	}
	var rec *files.Record
	var data io.ReadCloser
	var err error
	if r.Method == http.MethodHead {
		// The headers only (a download manager's first look): no download
		// is counted.
		if rec, err = s.cfg.Files.Lookup(b.session.AccountID, r.PathValue("id")); err == nil && rec.Downloads >= files.LinkDownloads {
			err = countersign.Errorf(countersign.ELIMIT, "this file has been downloaded %d times, the most a link serves: ask the agent for a new one", files.LinkDownloads)
		}
	} else {
		rec, data, err = s.cfg.Files.Fetch(b.session.AccountID, r.PathValue("id"))
	}
	if err != nil {
		return err
	}
	if data != nil {
		defer data.Close()
		// The audit log holds every download before a byte is served; a
		// HEAD serves none and counts none.
		if err := s.cfg.Files.AuditDownloaded(r.Context(), rec, b.approver.Username); err != nil {
			return err
		}
	}
	h := w.Header()
	h.Set("Content-Security-Policy", fileCSP)
	h.Set("Content-Type", rec.MIME)
	disposition := mime.FormatMediaType("attachment", map[string]string{"filename": rec.Name})
	if disposition == "" {
		disposition = "attachment"
	}
	h.Set("Content-Disposition", disposition)
	h.Set("Content-Length", strconv.FormatInt(rec.Size, 10))
	h.Set("Cache-Control", "no-store")
	// A large file over a slow line takes longer than the server's write
	// timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(10 * time.Minute))
	w.WriteHeader(http.StatusOK)
	if data == nil {
		return nil
	}
	// Streamed chunk by chunk; a blob that fails to open cuts the answer
	// short, which the browser reports as a failed download.
	if _, err := io.Copy(w, data); err != nil {
		s.log.Warn("download cut off", "reference", rec.Reference, "err", err)
	}
	return nil
}
