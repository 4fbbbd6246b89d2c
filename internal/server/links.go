package server

import (
	"net/http"
	"strconv"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

// confirmPage is the data of a one-time link's page.
type confirmPage struct {
	pageBase
	R       *requestView
	Action  string
	Minutes int
	PostURL string
	Error   string
	Done    bool
	// Off: no link may decide the request (its account has a viewer); the
	// page shows why, and no button.
	Off bool
}

// linkPage serves a one-time link of the seed routes: GET shows the request
// and one button, the POST from that page (same origin, carrying the
// link's token in its URL) takes the decision. A link of another request,
// of another action or of nothing answers like an unknown one.
func (s *Server) linkPage(prefix, action string) pageHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		seedID, token := prefix+r.PathValue("id"), r.PathValue("token")
		minutes := 0
		if action == approval.LinkAutoApprove {
			n, err := strconv.Atoi(r.PathValue("minutes"))
			if err != nil {
				return countersign.Errorf(countersign.ENOTFOUND, "this link is not valid")
			}
			minutes = min(max(n, 1), 60) // the seed clamps to 1–60
		}
		req, err := s.service.LinkRequest(r.Context(), seedID, action, token)
		if err != nil {
			return err
		}
		p := confirmPage{R: viewOf(req), Action: action, Minutes: minutes, PostURL: r.URL.EscapedPath()}
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
		got, err := s.service.DecideByLink(r.Context(), seedID, action, token,
			countersign.DecisionInput{Text: text, AutoApproveMinutes: minutes})
		switch code := countersign.ErrorCode(err); code {
		case "":
			p.R, p.Done = viewOf(got), true
			s.log.Info("decided by link", "request", got.ID, "reference", got.Reference, "status", got.Status)
			return s.render(w, http.StatusOK, "confirm", p)
		case countersign.ECONFLICT, countersign.EINVALID, countersign.EFORBIDDEN:
			if cur, ferr := s.service.LinkRequest(r.Context(), seedID, action, token); ferr == nil {
				p.R = viewOf(cur)
			}
			p.Error, p.Off = countersign.ErrorMessage(err)+".", code == countersign.EFORBIDDEN
			return s.render(w, statusOf[code], "confirm", p)
		}
		return err
	}
}
