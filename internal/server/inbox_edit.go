package server

import (
	"net/http"
	"slices"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

// reasonView is a risk reason of an edited request; New when the edit
// added it.
type reasonView struct {
	Text string
	New  bool
}

// editPage is the data of a request's edit page: the form and, once the
// approver asked to see the edit, the request as the edit makes it.
type editPage struct {
	pageBase
	R        *requestView // the request as the agent asked
	Form     editForm
	Error    string
	Edited   *requestView // nil until the approver asks to see the edit
	Reasons  []reasonView
	EditJSON string // the edit's arguments, for the approve form
	Same     bool   // the edit changes nothing
	StepUp   stepUpView
	// Team is what a team rule says of the request; Votes is set when
	// it needs several approvals, the edit then being one of them.
	Team  *approval.Team
	Votes bool
}

// editRequest shows a pending request's edit form.
func (s *Server) editRequest(w http.ResponseWriter, r *http.Request, b *browser) error {
	req, err := s.editable(r, b)
	if err != nil || req.Status != countersign.StatusPending {
		return s.notEditable(w, r, req, err)
	}
	return s.renderEdit(w, r, b, http.StatusOK, req, editFormOf(req, req.Arguments, r.URL.Query().Get("as") == "json"), nil, "")
}

// previewEdit reads the edit form and shows the request as the edit
// makes it, with the form again to change it: nothing is saved.
func (s *Server) previewEdit(w http.ResponseWriter, r *http.Request, b *browser) error {
	req, err := s.editable(r, b)
	if err != nil || req.Status != countersign.StatusPending {
		return s.notEditable(w, r, req, err)
	}
	if f := editFormOf(req, req.Arguments, false); f.Mode == "" {
		return s.renderEdit(w, r, b, http.StatusBadRequest, req, f, nil, "")
	}
	edit, form, err := editOf(req, r)
	if err != nil {
		return s.renderEdit(w, r, b, http.StatusBadRequest, req, form, nil, countersign.ErrorMessage(err)+".")
	}
	return s.renderEdit(w, r, b, http.StatusOK, req, form, edit, "")
}

// editable finds the request of an edit page: pending, and one the
// approver may decide; one decided meanwhile is returned as it is.
func (s *Server) editable(r *http.Request, b *browser) (*countersign.Request, error) {
	if !b.approver.Role.Decides() {
		return nil, approval.ErrViewer()
	}
	req, err := s.service.Find(r.Context(), b.approver, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if req.Status != countersign.StatusPending {
		return req, nil
	}
	team, err := s.service.TeamOf(r.Context(), b.approver, req)
	if err != nil {
		return nil, err
	}
	if team != nil && !team.May {
		return nil, countersign.Errorf(countersign.EFORBIDDEN, "This request is routed to %s: you see it but do not decide it", team.Route)
	}
	return req, nil
}

// notEditable answers an edit of a request that cannot be edited: the
// error, or, for one decided meanwhile, its page.
func (s *Server) notEditable(w http.ResponseWriter, r *http.Request, req *countersign.Request, err error) error {
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/approvals/"+req.ID, http.StatusSeeOther)
	return nil
}

// renderEdit shows the edit page of req with the form; with an edit, the
// request as the service says the edit makes it, or the service's
// refusal of the edit.
func (s *Server) renderEdit(w http.ResponseWriter, r *http.Request, b *browser, status int, req *countersign.Request, form editForm, edit *countersign.Edit, msg string) error {
	base, err := s.base(r.Context(), b)
	if err != nil {
		return err
	}
	p := editPage{pageBase: base, R: viewOf(req, s.filesOf(req)...), Form: form, Error: msg}
	if p.Team, err = s.service.TeamOf(r.Context(), b.approver, req); err != nil {
		return err
	}
	p.Votes = p.Team != nil && p.Team.Quorum > 0
	if edit != nil {
		edited, err := s.service.Edited(r.Context(), b.approver, req.ID, *edit)
		switch countersign.ErrorCode(err) {
		case "":
			if p.StepUp, err = s.stepUpOf(r, b, edited); err != nil {
				return err
			}
			p.Edited, p.Reasons, p.EditJSON = viewOf(edited, s.filesOf(edited)...), reasonsAdded(req, edited), string(edit.Arguments)
			p.Same = edited.Original == nil
		case countersign.ECONFLICT:
			// Decided or edited meanwhile: the request's page says so.
			cur, ferr := s.service.Find(r.Context(), b.approver, req.ID)
			if ferr != nil {
				return ferr
			}
			return s.renderRequest(w, r, b, http.StatusConflict, cur, countersign.ErrorMessage(err)+".")
		case countersign.EINVALID:
			// The edit is refused: the form again, with why.
			status = http.StatusBadRequest
			if p.Error == "" {
				p.Error = countersign.ErrorMessage(err) + "."
			}
		default:
			return err
		}
	}
	return s.render(w, status, "edit", p)
}

// reasonsAdded are the reasons of the edited request, each marked when
// the edit added it.
func reasonsAdded(orig, edited *countersign.Request) []reasonView {
	had := reasonsOf(orig)
	var out []reasonView
	for _, r := range reasonsOf(edited) {
		out = append(out, reasonView{Text: r, New: !slices.Contains(had, r)})
	}
	return out
}

// decideEdit answers a decision form that carried an edit and was
// refused: the edit page again, with the edit and the service's words;
// the page of the request when it was decided meanwhile.
func (s *Server) decideEdit(w http.ResponseWriter, r *http.Request, b *browser, status int, d countersign.DecisionInput, msg string) error {
	req, err := s.service.Find(r.Context(), b.approver, r.PathValue("id"))
	if err != nil {
		return err
	}
	if req.Status != countersign.StatusPending {
		return s.renderRequest(w, r, b, http.StatusConflict, req, msg)
	}
	form := editFormOf(req, d.Edit.Arguments, false)
	if form.Mode == "" {
		return s.renderEdit(w, r, b, status, req, form, nil, msg)
	}
	return s.renderEdit(w, r, b, status, req, form, d.Edit, msg)
}
