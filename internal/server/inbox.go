package server

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/callview"
	"github.com/countersign/countersign/internal/limit"
	"github.com/countersign/countersign/internal/visible"
)

// requestView is a request as the pages show it.
type requestView struct {
	ID, Ref, Kind, Action, Preview, Key, Status string
	Reasons                                     []string
	Ctx                                         countersign.RequestContext
	Arguments                                   string
	CreatedAt, ExpiresAt, DecidedAt             time.Time
	DecidedBy, Text                             string
	Pending                                     bool
	// Binding is the request's binding hash, which an approval form
	// names as the action its approver saw.
	Binding string
	// Window says what an auto-approve window opened on the request lets
	// through.
	Window approval.WindowTerms
	// Covers says, for a pending Bash call, which delete of the rm wrapper
	// approving it also lets run; nil for other requests.
	Covers *coverView
	// Call is what an MCP call or a Claude Code tool call other than Bash
	// will run; Rm is a delete of the rm wrapper. Nil for other requests,
	// which show their preview.
	Call *callView
	Rm   *rmView
	Bash *bashView
	// Summary says in one line what the request does (callview.Summary).
	Summary string
	// Outcome says who decided what and when, and whether the agent has
	// used the approval; empty while pending.
	Outcome    string
	ConsumedAt time.Time
	// Head and Body are the preview's first line and the rest, for a
	// request shown by its preview.
	Head, Body string
	// Ran is what the agent reported it ran under the approval; nil
	// before a report.
	Ran *ranView
	// More counts the arguments an inbox card leaves out.
	More int
	// Team is what a team rule says of a pending request on an inbox
	// card: whom it is routed to, the approvals it has; nil for none.
	Team *approval.Team
	// ShowAction: a request shown by its preview shows its action too,
	// when the preview does not say it.
	ShowAction bool
	// Edited is set on a request an approver edited before approving
	// it: the view is then of the edited action, and Edited says who
	// edited it and what the agent asked for.
	Edited *editedView
}

// editedView is what an approver's edit changed of a request.
type editedView struct {
	By       string
	Original *requestView
}

// asAsked is the request as the agent asked for it, before an
// approver's edit; nil for a request no one edited.
func asAsked(r *countersign.Request) *countersign.Request {
	o := r.Original
	if o == nil {
		return nil
	}
	orig := *r
	orig.Original = nil
	orig.Arguments, orig.ArgsHash, orig.Preview, orig.PreviewHash, orig.RiskReasons = o.Arguments, o.ArgsHash, o.Preview, o.PreviewHash, o.RiskReasons
	orig.ArgumentsText = approval.ArgumentsText(o.Arguments)
	return &orig
}

// coverView is the delete of the rm wrapper that approving a Bash call
// also lets run without asking again (approval.CoveredDeletes), as the
// decision pages say it.
type coverView struct {
	// Covered: the paths are the delete's. Otherwise the approval covers
	// no delete, and the paths are those the agent named that the
	// command line does not delete.
	Covered bool
	Paths   []string // at most maxCoverShown
	More    int      // how many paths more
}

// maxCoverShown bounds the paths a decision page lists.
const maxCoverShown = 20

// coversOf is the coverView of a pending Bash call, nil for any other
// request: what approving it decides.
func coversOf(r *countersign.Request) *coverView {
	if r.Status != countersign.StatusPending || r.Kind != countersign.KindTool || r.Action != "Bash" {
		return nil
	}
	c := &coverView{Paths: approval.CoveredDeletes(r)}
	c.Covered = len(c.Paths) > 0
	if !c.Covered && r.Scope != nil {
		c.Paths = r.Scope.Paths
	}
	if n := len(c.Paths); n > maxCoverShown {
		c.Paths, c.More = c.Paths[:maxCoverShown], n-maxCoverShown
	}
	return c
}

// reasonsOf are the reasons a page shows for r: an MCP call's tier comes
// first, from the fact step-up decides on, whether or not the agent's side
// wrote it as a reason (a reason naming another tier is refused when the
// request is made).
func reasonsOf(r *countersign.Request) []string {
	if r.Kind != countersign.KindMCP {
		return r.RiskReasons
	}
	tier := "tier: unknown (any tier's rules apply)"
	if r.Tier != "" {
		tier = approval.TierReason(r.Tier)
	}
	if slices.Contains(r.RiskReasons, tier) {
		return r.RiskReasons
	}
	return append([]string{tier}, r.RiskReasons...)
}

// viewOf is a request as its page shows it; files are the uploads its
// call carries (Server.filesOf).
func viewOf(r *countersign.Request, files ...fileView) *requestView {
	v := &requestView{
		ID: r.ID, Ref: countersign.FormatReference(r.Reference), Kind: string(r.Kind), Action: r.Action,
		Preview: r.Preview, Key: r.KeyName, Status: string(r.Status), Reasons: reasonsOf(r), Ctx: r.Context,
		Arguments: r.ArgumentsText,
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, DecidedAt: r.DecidedAt, DecidedBy: r.DecidedBy,
		Text: r.Reason, Pending: r.Status == countersign.StatusPending, Binding: r.BindingHash(),
	}
	v.Window = approval.DescribeWindow(r)
	v.Covers = coversOf(r)
	v.Call = callOf(r, files)
	v.Rm = rmOf(r)
	v.Bash = bashOf(r)
	v.Summary = callview.Summary(string(r.Kind), r.Action, r.Arguments)
	v.Outcome = outcomeOf(r)
	v.ConsumedAt = r.ConsumedAt
	v.Ran = ranViewOf(r)
	v.Head, v.Body, _ = strings.Cut(r.Preview, "\n")
	v.Body = strings.TrimPrefix(v.Body, "\n")
	if strings.TrimSpace(r.Preview) == "" {
		v.Head, _, _ = strings.Cut(r.Action, "\n")
	}
	v.ShowAction = v.Call == nil && v.Rm == nil && v.Bash == nil && !strings.Contains(r.Preview, r.Action)
	if orig := asAsked(r); orig != nil {
		v.Edited = &editedView{By: deciderOf(r.DecidedBy), Original: viewOf(orig)}
		v.Edited.Original.Covers = nil
	}
	if v.Arguments == "" && len(r.Arguments) > 0 && string(r.Arguments) != "{}" {
		// A request stored before its arguments text was: rendered
		// here, bounded as at create. Every request created since has
		// it stored.
		v.Arguments = approval.ArgumentsText(r.Arguments)
	}
	return v
}

// Bounds of an inbox row, so that the inbox of many requests stays small
// whatever their previews, actions and reasons hold: the request's page
// shows them whole.
const (
	rowLines   = 6    // lines of the preview
	rowPreview = 1024 // bytes of the preview
	rowAction  = 200  // bytes of the action's first line
	rowReasons = 5    // risk reasons
	rowFields  = 4    // arguments of a call
	rowField   = 160  // bytes of an argument's first line
)

// rowOf is a request as an inbox row shows it: the beginning of its
// preview and of its action, and its first reasons, each cut with a
// visible mark; files are the uploads its call carries.
func rowOf(r *countersign.Request, files ...fileView) *requestView {
	v := viewOf(r, files...)
	v.Arguments, v.Covers = "", nil // not shown in the inbox
	if v.Call != nil {
		// The card leads with the call's first arguments, each cut to
		// its first lines; the page shows them whole.
		var top []callview.Field
		for _, f := range v.Call.Fields {
			if f.Depth != 0 || f.Kind == "more" {
				continue
			}
			if len(top) == rowFields {
				v.More++
				continue
			}
			f.Head, _, _ = strings.Cut(f.Head, "\n")
			f.Head = limit.Text(f.Head, rowField)
			top = append(top, f)
		}
		v.Call.Fields, v.Call.About = top, nil
		if len(v.Call.Diff) > rowLines {
			v.Call.Diff = v.Call.Diff[:rowLines]
		}
	}
	preview := strings.SplitN(r.Preview, "\n", rowLines+1)
	if len(preview) > rowLines {
		preview[rowLines] = "…"
	}
	v.Preview = limit.Text(strings.Join(preview, "\n"), rowPreview)
	action, _, _ := strings.Cut(r.Action, "\n")
	v.Action = limit.Text(action, rowAction)
	if v.Bash != nil {
		v.Bash.Command = cutLines(v.Bash.Command)
	}
	if v.Rm != nil {
		v.Rm.Headline, v.Rm.Command = limit.Text(v.Rm.Headline, rowAction), cutLines(v.Rm.Command)
	}
	if n := len(r.RiskReasons); n > rowReasons {
		v.Reasons = append(append([]string{}, r.RiskReasons[:rowReasons]...), fmt.Sprintf("… and %d more", n-rowReasons))
	}
	return v
}

// inboxPage is the data of the inbox.
type inboxPage struct {
	pageBase
	Pending []*requestView
	History []*requestView
}

func (s *Server) inbox(w http.ResponseWriter, r *http.Request, b *browser) error {
	base, err := s.base(r.Context(), b)
	if err != nil {
		return err
	}
	list, err := s.service.List(r.Context(), b.approver, countersign.RequestFilter{Limit: 100})
	if err != nil {
		return err
	}
	p := inboxPage{pageBase: base}
	p.Live = "inbox"
	for _, req := range list {
		if req.Status == countersign.StatusPending {
			row := rowOf(req, s.filesOf(req)...)
			if row.Team, err = s.service.TeamOf(r.Context(), b.approver, req); err != nil {
				return err
			}
			if row.Edited != nil && row.Team != nil && len(row.Team.Votes) > 0 {
				row.Edited.By = visible.Line(row.Team.Votes[0].Username) // as on its page
			}
			p.Pending = append(p.Pending, row)
		} else {
			p.History = append(p.History, historyOf(req))
		}
	}
	return s.render(w, http.StatusOK, "inbox", p)
}

// requestPage is the data of a request's page.
type requestPage struct {
	pageBase
	R             *requestView
	Error         string
	WindowMinutes []int
	StepUp        stepUpView
	Files         []fileView // the uploads the call names (uploads.go)
	// Team is what a team rule says of the request: who it is routed to,
	// the approvals it needs and has; nil when no rule routes or counts
	// it. Votes is set when it needs several approvals (no window opens).
	Team  *approval.Team
	Votes bool
	// Editable: the approver may edit the request before approving it.
	Editable bool
}

var windowMinutes = []int{5, 15, 30, 60}

func (s *Server) requestDetail(w http.ResponseWriter, r *http.Request, b *browser) error {
	req, err := s.service.Find(r.Context(), b.approver, r.PathValue("id"))
	if err != nil {
		return err
	}
	return s.renderRequest(w, r, b, http.StatusOK, req, "")
}

func (s *Server) renderRequest(w http.ResponseWriter, r *http.Request, b *browser, status int, req *countersign.Request, msg string) error {
	base, err := s.base(r.Context(), b)
	if err != nil {
		return err
	}
	files := s.filesOf(req)
	p := requestPage{pageBase: base, R: viewOf(req, files...), Error: msg, WindowMinutes: windowMinutes, Files: files}
	if p.StepUp, err = s.stepUpOf(r, b, req); err != nil {
		return err
	}
	if p.Team, err = s.service.TeamOf(r.Context(), b.approver, req); err != nil {
		return err
	}
	p.Votes = p.Team != nil && p.Team.Quorum > 0
	if p.R.Edited != nil && p.Votes && len(p.Team.Votes) > 0 {
		// The votes that count are those for the edited action, which
		// did not exist before the edit: the oldest is the editor's.
		p.R.Edited.By = visible.Line(p.Team.Votes[0].Username)
	}
	p.Editable = p.R.Pending && p.R.Edited == nil && req.SeedID == "" && b.approver.Role.Decides() && (p.Team == nil || p.Team.May)
	if p.R.Pending {
		p.Live = "request"
	}
	return s.render(w, status, "request", p)
}

// decide takes a decision from the request's page. A conflict (someone
// decided first, or it expired) shows the page again with what happened.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, b *browser) error {
	d, err := decisionOf(r)
	if err != nil {
		return err
	}
	// A passkey's assertion, when the form carries one, is checked
	// before anything is decided.
	err = s.stepUpProof(r, b, &d)
	var req *countersign.Request
	if err == nil {
		req, err = s.service.Decide(r.Context(), b.approver, r.PathValue("id"), d)
	}
	switch code := countersign.ErrorCode(err); {
	case d.Edit != nil && (passkeyNeeded(err) || code == countersign.EINVALID):
		// An edit that was refused, or that needs a passkey: its page
		// again, with why.
		status := http.StatusBadRequest
		if code == countersign.EFORBIDDEN {
			status = http.StatusForbidden
		}
		return s.decideEdit(w, r, b, status, d, countersign.ErrorMessage(err)+".")
	case passkeyNeeded(err):
		cur, ferr := s.service.Find(r.Context(), b.approver, r.PathValue("id"))
		if ferr != nil {
			return ferr
		}
		return s.renderRequest(w, r, b, http.StatusForbidden, cur, countersign.ErrorMessage(err)+".")
	case code == "":
		http.Redirect(w, r, "/approvals/"+req.ID, http.StatusSeeOther)
		return nil
	case code == countersign.ECONFLICT || code == countersign.EINVALID:
		cur, ferr := s.service.Find(r.Context(), b.approver, r.PathValue("id"))
		if ferr != nil {
			return ferr
		}
		status := http.StatusConflict
		if countersign.ErrorCode(err) == countersign.EINVALID {
			status = http.StatusBadRequest
		}
		return s.renderRequest(w, r, b, status, cur, countersign.ErrorMessage(err)+".")
	}
	return err
}

// events streams "changed" to the inbox whenever a request of the session's
// account changes, as server-sent events. The page reloads on it; the hub
// only rings, so nothing about any request travels here.
func (s *Server) events(w http.ResponseWriter, r *http.Request, b *browser) error {
	rc := http.NewResponseController(w)
	// The stream outlives the server's write timeout; it ends by itself
	// after a while and the browser reconnects.
	const streamFor = 10 * time.Minute
	rc.SetWriteDeadline(time.Now().Add(streamFor + 10*time.Second))
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 3000\n\n")
	rc.Flush()

	hub := s.service.Hub()
	end := time.NewTimer(streamFor)
	defer end.Stop()
	beat := time.NewTicker(25 * time.Second)
	defer beat.Stop()
	topic := approval.AccountTopic(b.session.AccountID)
	for {
		ch, stop := hub.Subscribe(topic)
		select {
		case <-ch:
			// A session that ended since the stream began hears nothing
			// more.
			if again, err := s.browserOf(r.Context(), r); err != nil || again == nil {
				stop()
				return nil
			}
			fmt.Fprint(w, "event: changed\ndata: {}\n\n")
		case <-beat.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case <-end.C:
			stop()
			return nil
		case <-r.Context().Done():
			stop()
			return nil
		case <-hub.Closed():
			stop()
			return nil
		}
		stop()
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}

// cutLines is the beginning of a text an inbox row shows: its first
// rowLines lines, at most rowPreview bytes.
func cutLines(s string) string {
	lines := strings.SplitN(s, "\n", rowLines+1)
	if len(lines) > rowLines {
		lines[rowLines] = "…"
	}
	return limit.Text(strings.Join(lines, "\n"), rowPreview)
}

// historyOf is a decided request as a Decided row shows it: what it did
// in one line, and who decided when; nothing of it is rendered that the
// row does not show.
func historyOf(r *countersign.Request) *requestView {
	return &requestView{ID: r.ID, Ref: countersign.FormatReference(r.Reference), Status: string(r.Status),
		Summary:   callview.Summary(string(r.Kind), r.Action, r.Arguments),
		DecidedBy: r.DecidedBy, DecidedAt: r.DecidedAt, Ran: ranViewOf(r), Edited: editedMark(r)}
}

// editedMark marks a Decided row of an edited request, without the
// original, which the row does not show.
func editedMark(r *countersign.Request) *editedView {
	if r.Original == nil {
		return nil
	}
	return &editedView{By: deciderOf(r.DecidedBy)}
}
