package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/identity"
)

// Words of the decision pages about the delete of the rm wrapper that
// approving a Bash call lets run.
const (
	coversSome  = "Approving also lets the rm wrapper run this delete once in this agent session, without asking again:"
	coversNone  = "Approving lets no delete of the rm wrapper run without asking again."
	coversNamed = "The agent named paths to delete that this command line does not delete:"
)

// coversBash is a Bash call of the hook in /src that names the paths as
// its line's deletes.
func coversBash(line string, paths ...string) client.CreateInput {
	args, _ := json.Marshal(map[string]string{"command": line})
	return client.CreateInput{Kind: "tool", Action: "Bash", Arguments: args, Preview: "$ " + line,
		RiskReasons: []string{"recursive deletion (-r/-R)"},
		Context:     client.Context{SessionID: "s1", Cwd: "/src"},
		Scope:       &client.Scope{Commands: []string{strings.Fields(line)[0]}, Paths: paths}}
}

// TestRequestPageSaysWhatItCovers: the decision page of a Bash call says
// which delete of the rm wrapper approving it also lets run: the paths its
// line deletes, or none, naming the paths the agent claimed that the line
// does not delete.
func TestRequestPageSaysWhatItCovers(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	s := e.signIn("alice")
	cases := []struct {
		name      string
		in        client.CreateInput
		want, not []string
	}{
		{"rm -rf of two trees", coversBash("rm -rf victim '<b>x'", "/src/<b>x", "/src/victim"),
			[]string{coversSome, "<li><code>/src/&lt;b&gt;x</code></li>", "<li><code>/src/victim</code></li>"}, []string{coversNone}},
		{"ls -la naming a tree", coversBash("ls -la", "/src/victim"),
			[]string{coversNone, coversNamed, "<li><code>/src/victim</code></li>"}, []string{coversSome}},
		{"ls naming nothing", coversBash("ls"),
			[]string{coversNone}, []string{coversSome, coversNamed, "/src/victim"}},
		{"a call of another tool", client.CreateInput{Kind: "tool", Action: "Write", Context: client.Context{SessionID: "s1"},
			Scope: &client.Scope{Paths: []string{"/src/victim"}}},
			nil, []string{coversSome, coversNone, coversNamed}},
	}
	for _, c := range cases {
		req := e.create(e.agentA, c.in)
		page := e.get("/approvals/"+req.ID, e.as(s.id)).want(t, c.name, http.StatusOK).body
		for _, w := range c.want {
			if !strings.Contains(page, w) {
				t.Errorf("%s: the page lacks %q:\n%s", c.name, w, page)
			}
		}
		for _, n := range c.not {
			if strings.Contains(page, n) {
				t.Errorf("%s: the page holds %q", c.name, n)
			}
		}
	}
}

// TestLinkPageSaysWhatItCovers: the page of an e-mailed approve link says
// it as well, before the button.
func TestLinkPageSaysWhatItCovers(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	agent, err := (&identity.Authenticator{Store: s.Store}).Agent(s.Ctx, s.KeyA)
	if err != nil {
		t.Fatal(err)
	}
	tokens, links := approval.NewLinks(approval.LinkApprove)
	r, _, err := s.Service.Create(s.Ctx, agent, countersign.CreateInput{Kind: countersign.KindTool, Action: "Bash",
		Arguments: json.RawMessage(`{"command":"rm -rf victim"}`), Links: links,
		Context: countersign.RequestContext{SessionID: "s1", Cwd: "/src"},
		Scope:   &countersign.Scope{StatedScope: countersign.StatedScope{Commands: []string{"rm"}, Paths: []string{"/src/victim"}}}})
	if err != nil {
		t.Fatal(err)
	}
	body := string(nlDo(t, s, http.MethodGet, tokens[approval.LinkApprove], "", nil).body)
	at := strings.Index(body, coversSome)
	if at < 0 || !strings.Contains(body, "<li><code>/src/victim</code></li>") || at > strings.Index(body, "Approve "+countersign.FormatReference(r.Reference)+" once") {
		t.Errorf("the approve link's page does not say what approving covers before its button:\n%s", body)
	}
}
