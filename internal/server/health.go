package server

import (
	"net/http"
	"time"

	"github.com/countersign/countersign"
)

// healthz answers 200 while the server can do its work, and 503 with the
// reason while it cannot: while its store cannot write (a full disk, say),
// every request would fail, and a load balancer or an operator must see
// it. It answers 200 again by itself once the store writes again.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if h, ok := s.cfg.Store.(countersign.WriteHealth); ok {
		if reason := h.WriteError(); reason != "" {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "reason": reason,
				"uptime_seconds": time.Since(s.started).Seconds()})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "uptime_seconds": time.Since(s.started).Seconds()})
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	s.registry.Write(w)
}

// seedHealth is the seed's health check.
func (s *Server) seedHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "uptime": time.Since(s.started).Seconds()})
}

// cannotWriteRetry is the Retry-After of an answer given while the store
// cannot write.
const cannotWriteRetry = 5 * time.Second

// cannotWrite reports whether err, internal, was met while the store cannot
// write, and the store's reason. Such a failure is answered 503 with the
// reason, which a client may retry later, and logged only at debug level:
// the store logs the start and the end of the episode, once each, instead
// of one error per request.
func (s *Server) cannotWrite(r *http.Request, err error) (string, bool) {
	h, ok := s.cfg.Store.(countersign.WriteHealth)
	if !ok || countersign.ErrorCode(err) != countersign.EINTERNAL {
		return "", false
	}
	reason := h.WriteError()
	if reason == "" {
		return "", false
	}
	s.log.Debug("the store cannot write", "route", r.Pattern, "err", err)
	return reason, true
}
