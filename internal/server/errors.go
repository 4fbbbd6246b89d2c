package server

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/countersign/countersign"
)

// statusOf maps an error code to its HTTP status.
var statusOf = map[string]int{
	countersign.EINVALID:      http.StatusBadRequest,
	countersign.EUNAUTHORIZED: http.StatusUnauthorized,
	countersign.EFORBIDDEN:    http.StatusForbidden,
	countersign.ENOTFOUND:     http.StatusNotFound,
	countersign.ECONFLICT:     http.StatusConflict,
	countersign.EEXPIRED:      http.StatusConflict,
	countersign.ETOOLARGE:     http.StatusRequestEntityTooLarge,
	countersign.ELIMIT:        http.StatusTooManyRequests,
	countersign.EUNAVAILABLE:  http.StatusServiceUnavailable,
	countersign.EMISDIRECTED:  http.StatusMisdirectedRequest,
	countersign.EUNSUPPORTED:  http.StatusUnsupportedMediaType,
	countersign.ETIMEOUT:      http.StatusRequestTimeout,
	countersign.EINTERNAL:     http.StatusInternalServerError,
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeAPIError answers an error as JSON. Internal errors are logged with an
// id and answered with that id only, never with their text.
func (s *Server) writeAPIError(w http.ResponseWriter, r *http.Request, err error) {
	code := countersign.ErrorCode(err)
	msg := countersign.ErrorMessage(err)
	status, ok := statusOf[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if code == countersign.EINTERNAL && r.Context().Err() != nil {
		// The client went away mid-request: nobody reads the answer, and
		// it is no fault of the server's.
		s.log.Debug("client gone", "route", r.Pattern, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, errorBody{errorDetail{Code: countersign.EUNAVAILABLE, Message: "the request was cancelled"}})
		return
	}
	if reason, ok := s.cannotWrite(r, err); ok {
		w.Header().Set("Retry-After", retryAfter(cannotWriteRetry))
		writeJSON(w, http.StatusServiceUnavailable, errorBody{errorDetail{Code: countersign.EUNAVAILABLE, Message: reason + "; try again later."}})
		return
	}
	if code == countersign.EINTERNAL {
		id := countersign.NewID("")[:10]
		s.log.Error("internal error", "error_id", id, "route", r.Pattern, "err", err)
		msg = "Internal error; the server log has the details under id " + id + "."
	}
	var e *countersign.Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(e.RetryAfter.Seconds()))))
	}
	if code == countersign.EUNAUTHORIZED && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="countersign"`)
	}
	writeJSON(w, status, errorBody{errorDetail{Code: code, Message: msg}})
}

// writeJSON answers v as JSON with the status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	enc.Encode(v)
}
