package confirm

import (
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"runtime"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/gateway"
)

// NewForClient returns the stdio gateway of an agent with a countersign
// server: approvals are requests of kind mcp on that server, made with the
// agent key of c. The server knows the key's id; the gateway binds its
// request states to a hash of the key instead.
func NewForClient(cfg *gateway.Config, c *client.Client, log *slog.Logger, stderr io.Writer) (*gateway.Gateway, error) {
	if len(cfg.Keys) > 0 {
		return nil, fmt.Errorf("%s[keys] names agent keys of countersign serve or of the standalone gateway; "+
			"with a server, this gateway's one key has the [policy]: remove [keys]", cfg.SourcePrefix())
	}
	p := &gateway.Principal{ID: "key:" + countersign.HashSecret(c.Credential)[:32]}
	// The gateway runs an approval's action as approved, an approver's
	// edit of the arguments included (approvedArgs).
	c.AcceptEdits = true
	return build(cfg, &clientApprovals{c: c}, randomKey(), gateway.Options{Fixed: p, Log: log, Stderr: stderr})
}

// StandaloneOptions are the surroundings of a gateway without a server,
// which the caller builds (the composition root) and stops after the
// gateway.
type StandaloneOptions struct {
	// Service is the approval service on the gateway's own store: its
	// account and agent key, the approvals and their audit log. Its
	// requests of kind mcp wait ApprovalTTL.
	Service *approval.Service
	// Agent is the gateway's own agent key in that store.
	Agent countersign.Agent
	// Pages is a private directory for the files that lead the browser
	// to the local approval page.
	Pages  string
	Log    *slog.Logger
	Stderr io.Writer // upstream commands' stderr
	// Open shows the local approval page to the user, given the path of a
	// private file that leads the browser there; nil: the configured
	// opener, else the system's (xdg-open, open, rundll32). The path is
	// no secret; the one-time link in the file never reaches the model, a
	// log or a command line.
	Open func(file string) error
}

// NewStandalone returns the stdio gateway of an agent without a server
// (ADR 0003): approvals are o.Service's, the answer to an elicitation form
// is the decision, and clients without one get a local approval page on
// 127.0.0.1, opened with the system's opener. close releases the page; the
// service and its store stay the caller's.
func NewStandalone(cfg *gateway.Config, o StandaloneOptions) (g *gateway.Gateway, close func(), err error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Service == nil || o.Agent.KeyID == "" || o.Pages == "" {
		return nil, nil, fmt.Errorf("a standalone gateway needs its store, its key there and a directory for its pages")
	}
	open := o.Open
	if open == nil {
		open = opener(cfg.Opener)
	}
	page, err := newLocalPage(o.Service, o.Agent, open, o.Pages, o.Log)
	if err != nil {
		return nil, nil, err
	}
	p := gateway.PrincipalOf(o.Agent)
	g, err = build(cfg, &serviceApprovals{svc: o.Service, decider: "mcp-client", page: page}, randomKey(),
		gateway.Options{Fixed: &p, Log: o.Log, Stderr: o.Stderr})
	if err != nil {
		page.close()
		return nil, nil, err
	}
	return g, page.close, nil
}

// opener returns the function that opens a file (the local page's) with
// the configured command, or the system's.
func opener(configured []string) func(string) error {
	cmd := configured
	if len(cmd) == 0 {
		switch runtime.GOOS {
		case "darwin":
			cmd = []string{"open"}
		case "windows":
			cmd = []string{"rundll32", "url.dll,FileProtocolHandler"}
		default:
			cmd = []string{"xdg-open"}
		}
	}
	return func(file string) error {
		c := exec.Command(cmd[0], append(cmd[1:], file)...)
		if err := c.Start(); err != nil {
			return fmt.Errorf("run %s: %w", cmd[0], err)
		}
		go c.Wait() // reap it; a browser may outlive it
		return nil
	}
}

func randomKey() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}
