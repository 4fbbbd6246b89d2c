package server

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/identity"
)

// decisionOf reads the decision fields of a request page's form.
func decisionOf(r *http.Request) (countersign.DecisionInput, error) {
	d := countersign.DecisionInput{Decision: countersign.Decision(r.PostFormValue("decision")), Text: r.PostFormValue("text"),
		Binding: r.PostFormValue("binding_hash")}
	if v := r.PostFormValue("auto_approve_minutes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return d, countersign.Errorf(countersign.EINVALID, "Choose how many minutes to approve for.")
		}
		d.AutoApproveMinutes = n
	}
	if v := r.PostFormValue("edit"); v != "" {
		// The approve form of an edit page carries the edit's
		// arguments as the server wrote them; the service checks them.
		args, err := jsonArguments(v)
		if err != nil {
			return d, err
		}
		d.Edit = &countersign.Edit{Arguments: args}
	}
	return d, nil
}

// decided is the request a decision is about, as the decision makes it:
// with an edit, the request as the edit makes it (Service.Edited), whose
// binding a passkey confirms.
func (s *Server) decided(r *http.Request, b *browser, d countersign.DecisionInput) (*countersign.Request, error) {
	if d.Edit != nil {
		return s.service.Edited(r.Context(), b.approver, r.PathValue("id"), *d.Edit)
	}
	return s.service.Find(r.Context(), b.approver, r.PathValue("id"))
}

// beginStepUp starts the passkey assertion of one decision on one request:
// its challenge is bound to the request id, its binding hash (of the
// request as an edit makes it, when the form carries one), the decision
// and the window's minutes.
func (s *Server) beginStepUp(w http.ResponseWriter, r *http.Request, b *browser) error {
	if err := s.beginCeremony(r); err != nil {
		return err
	}
	d, err := decisionOf(r)
	if err != nil {
		return err
	}
	if d.Decision != countersign.DecisionApprove {
		return countersign.Errorf(countersign.EINVALID, "Only an approval is confirmed with a passkey.")
	}
	if !b.approver.Role.Decides() {
		// No prompt for an approval the service would refuse.
		return approval.ErrViewer()
	}
	req, err := s.decided(r, b, d)
	if err != nil {
		return err
	}
	handle, options, err := s.passkeys.BeginStepUp(r.Context(), b.approver.ApproverID, req, d)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ceremonyStart{Handle: handle, Options: options})
	return nil
}

// stepUpProof checks the passkey assertion a decision form carries, if it
// carries one, and sets d.Verified. A form without one passes through:
// the service refuses an approval that needs it.
func (s *Server) stepUpProof(r *http.Request, b *browser, d *countersign.DecisionInput) error {
	if r.PostFormValue("webauthn_response") == "" {
		return nil
	}
	if s.passkeys == nil {
		return errNoPasskeys()
	}
	handle, resp, err := ceremonyAnswer(r)
	if err != nil {
		return err
	}
	req, err := s.decided(r, b, *d)
	if err != nil {
		return err
	}
	v, err := s.passkeys.VerifyStepUp(r.Context(), b.approver.ApproverID, req, *d, handle, resp)
	if err != nil {
		s.log.Info("step-up refused", "approver", b.approver.Username, "request", req.ID)
		return err
	}
	d.Verified = v
	return nil
}

// stepUpView is what a request's page shows of the step-up.
type stepUpView struct {
	Once, Window bool // approving once, or for a while, needs a passkey
	HasPasskey   bool
	Available    bool
	// AddURL is the page that adds a passkey and then returns to the
	// request's page.
	AddURL string
}

// stepUpOf says which approvals of req need a passkey for this browser.
func (s *Server) stepUpOf(r *http.Request, b *browser, req *countersign.Request) (stepUpView, error) {
	v := stepUpView{
		Once:      s.service.NeedsStepUp(req, countersign.DecisionInput{Decision: countersign.DecisionApprove}),
		Window:    s.service.NeedsStepUp(req, countersign.DecisionInput{Decision: countersign.DecisionApprove, AutoApproveMinutes: 1}),
		Available: s.passkeys != nil,
		AddURL:    "/passkeys?next=" + url.QueryEscape("/approvals/"+url.PathEscape(req.ID)),
	}
	if !v.Once && !v.Window {
		return v, nil
	}
	list, err := s.cfg.Store.Passkeys(r.Context(), b.approver.ApproverID)
	v.HasPasskey = len(list) > 0
	return v, err
}

// passkeyNeeded reports whether err is the refusal of an approval that
// needed a passkey.
func passkeyNeeded(err error) bool {
	return errors.Is(err, approval.ErrPasskeyNeeded) || errors.Is(err, identity.ErrNoPasskey)
}

// enrolPage is the data of an enrolment link's page.
type enrolPage struct {
	pageBase
	Token, Username string
	Done            bool
	Error           string
}

// enrolForm shows the page of a CLI's one-time enrolment link: it adds a
// passkey to the approver it names, without a sign-in.
func (s *Server) enrolForm(w http.ResponseWriter, r *http.Request) error {
	if s.passkeys == nil {
		return errNoPasskeys()
	}
	token := r.PathValue("token")
	ap, err := s.passkeys.Enrolment(r.Context(), token)
	if err != nil {
		return s.render(w, http.StatusNotFound, "enrol", enrolPage{Error: countersign.ErrorMessage(err)})
	}
	return s.render(w, http.StatusOK, "enrol", enrolPage{Token: token, Username: ap.Username})
}

func (s *Server) beginEnrolment(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := s.beginCeremony(r); err != nil {
		return err
	}
	handle, options, err := s.passkeys.BeginEnrolment(r.Context(), r.PathValue("token"), r.PostFormValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ceremonyStart{Handle: handle, Options: options})
	return nil
}

func (s *Server) finishEnrolment(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxAssertion+8<<10)
	if s.passkeys == nil {
		return errNoPasskeys()
	}
	token := r.PathValue("token")
	ap, err := s.passkeys.Enrolment(r.Context(), token)
	if err != nil {
		return s.render(w, http.StatusNotFound, "enrol", enrolPage{Error: countersign.ErrorMessage(err)})
	}
	handle, resp, err := ceremonyAnswer(r)
	if err == nil {
		_, err = s.passkeys.FinishEnrolment(r.Context(), token, handle, resp)
	}
	if code := countersign.ErrorCode(err); code == countersign.EINVALID || code == countersign.ECONFLICT {
		return s.render(w, http.StatusBadRequest, "enrol", enrolPage{Token: token, Username: ap.Username, Error: countersign.ErrorMessage(err)})
	} else if err != nil {
		return err
	}
	s.log.Info("passkey enrolled", "approver", ap.Username)
	return s.render(w, http.StatusOK, "enrol", enrolPage{Username: ap.Username, Done: true})
}
