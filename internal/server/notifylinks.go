package server

import (
	"net/http"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

// tokenLinkPage serves GET and POST /links/{token}: the one-time links of
// notifications, which name no request, only a token whose stored link
// says the request and the action. Like the seed routes' links, GET shows
// the request and one button and decides nothing (mail scanners open
// links); the POST from that page (same origin, checked by s.page) decides.
// The token is never logged: the route is logged by its pattern.
func (s *Server) tokenLinkPage(w http.ResponseWriter, r *http.Request) error {
	// One route for every method (one line in routes.go): GET and HEAD
	// show, POST decides, nothing else is allowed.
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return nil
	}
	token := r.PathValue("token")
	req, action, err := s.service.TokenLink(r.Context(), token)
	if err != nil {
		return err
	}
	p := confirmPage{R: viewOf(req), Action: action, PostURL: r.URL.EscapedPath()}
	if r.Method != http.MethodPost {
		if req.Status == countersign.StatusPending {
			if off := s.service.LinksDecide(r.Context(), req); countersign.ErrorCode(off) == countersign.EFORBIDDEN {
				// Said before anyone presses a button that would be refused.
				p.Error, p.Off = countersign.ErrorMessage(off)+".", true
			}
		}
		return s.render(w, http.StatusOK, "confirm", p)
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	text := r.PostFormValue("reason")
	if action == approval.LinkRespond {
		text = r.PostFormValue("response")
	}
	got, err := s.service.DecideByToken(r.Context(), token, countersign.DecisionInput{Text: text})
	switch code := countersign.ErrorCode(err); code {
	case "":
		p.R, p.Done = viewOf(got), true
		s.log.Info("decided by link", "request", got.ID, "reference", got.Reference, "status", got.Status)
		return s.render(w, http.StatusOK, "confirm", p)
	case countersign.ECONFLICT, countersign.EINVALID, countersign.EFORBIDDEN:
		if cur, _, ferr := s.service.TokenLink(r.Context(), token); ferr == nil {
			p.R = viewOf(cur)
		}
		p.Error, p.Off = countersign.ErrorMessage(err)+".", code == countersign.EFORBIDDEN
		return s.render(w, statusOf[code], "confirm", p)
	}
	return err
}
