package server

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/files"
)

// hopHeader marks a request one replica passed on to another, which then
// never passes it on again.
const hopHeader = "X-Countersign-Replica-Hop"

// atHolder passes a request for an upload page or a file that another
// replica holds on to that replica, as the browser sent it: the holder
// checks host, origin, session and CSRF token as for its own (the session
// is in the shared database), and the bytes stream through. Everything
// else, and a request passed on already, is this replica's.
func (s *Server) atHolder(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Files == nil || r.Header.Get(hopHeader) != "" {
			h(w, r)
			return
		}
		at, ok := s.cfg.Files.Remote(r.PathValue("id"))
		if !ok {
			h(w, r)
			return
		}
		target, err := url.Parse(at)
		if err != nil {
			h(w, r)
			return
		}
		// An upload body arrives at the browser's pace: the holder bounds
		// it; here it may take the holder's whole time.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(DefaultBodyLimits.Total + 5*time.Second))
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Minute))
		proxy := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.Out.Host = r.Host // the public host, which the holder checks
				pr.Out.Header.Set(hopHeader, "1")
			},
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				s.log.Warn("the replica holding a file cannot be reached", "err", err)
				s.writePageError(w, r, countersign.Errorf(countersign.EUNAVAILABLE,
					"The server that holds this file cannot be reached right now. Try again in a minute."))
			},
		}
		proxy.ServeHTTP(w, r)
	}
}

// internalUpload serves an upload to the replica whose gateway needs it:
// only with the replicas' HMAC and the agent's own credential, which is
// authenticated here again, as /mcp does (an agent key or a grant's
// access token), so that the upload is the principal's.
func (s *Server) internalUpload(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if s.cfg.Files == nil || !s.cfg.Files.CheckReplica(r, id) {
		s.writeAPIError(w, r, countersign.Errorf(countersign.ENOTFOUND, "not found"))
		return
	}
	a, err := s.mcpAgentOf(w, r)
	if err != nil {
		s.writeAPIError(w, r, countersign.Errorf(countersign.ENOTFOUND, "not found"))
		return
	}
	rec, err := s.cfg.Files.Upload(filesPrincipalOf(a), id)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	data, err := s.cfg.Files.Read(rec)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	s.cfg.Files.ServeUpload(w, r, rec, data)
}

func filesPrincipalOf(a countersign.Agent) files.Principal {
	return files.Principal{Account: a.AccountID, Key: a.KeyID}
}
