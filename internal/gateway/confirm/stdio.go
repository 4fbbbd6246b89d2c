package confirm

import (
	"context"
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
	"github.com/countersign/countersign/internal/identity"
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
	return build(cfg, &clientApprovals{c: c}, randomKey(), gateway.Options{Fixed: p, Log: log, Stderr: stderr})
}

// StandaloneOptions are the surroundings of a gateway without a server.
type StandaloneOptions struct {
	// Store is the gateway's own store: its account and agent key, the
	// approvals and their audit log. The caller opens it (main builds
	// every dependency) and closes it after the gateway.
	Store countersign.Store
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
// (ADR 0003): approvals live in a store of its own (o.Store), the answer to
// an elicitation form is the decision, and clients without one get a local
// approval page on 127.0.0.1, opened with the system's opener. close
// releases the page; the store stays the caller's.
func NewStandalone(ctx context.Context, cfg *gateway.Config, o StandaloneOptions) (g *gateway.Gateway, close func(), err error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Store == nil || o.Pages == "" {
		return nil, nil, fmt.Errorf("a standalone gateway needs its store and a directory for its pages")
	}
	agent, err := localAgent(ctx, o.Store)
	if err != nil {
		return nil, nil, err
	}
	if err := cfg.ResolveKeys(ctx, o.Store); err != nil {
		return nil, nil, err
	}
	hub := approval.NewHub()
	svc := approval.New(o.Store, nil, hub, approval.Config{TTL: approvalTTL}, o.Log, nil)
	open := o.Open
	if open == nil {
		open = opener(cfg.Opener)
	}
	page, err := newLocalPage(svc, agent, open, o.Pages, o.Log)
	if err != nil {
		hub.Close()
		return nil, nil, err
	}
	sweep, stopSweep := context.WithCancel(context.WithoutCancel(ctx))
	go svc.RunSweeper(sweep)
	p := gateway.PrincipalOf(agent)
	g, err = build(cfg, &serviceApprovals{svc: svc, decider: "mcp-client", page: page}, randomKey(),
		gateway.Options{Fixed: &p, Log: o.Log, Stderr: o.Stderr})
	close = func() {
		page.close()
		stopSweep()
		hub.Close()
	}
	if err != nil {
		close()
		return nil, nil, err
	}
	return g, close, nil
}

// localAgent returns the standalone gateway's own account and agent key,
// creating them in a new store.
func localAgent(ctx context.Context, store countersign.Store) (countersign.Agent, error) {
	const account, name = "local", "mcp-gateway"
	acc, err := store.AccountByName(ctx, account)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		acc, err = (&identity.Admin{Store: store}).CreateAccount(ctx, account)
	}
	if err != nil {
		return countersign.Agent{}, fmt.Errorf("the gateway's account: %w", err)
	}
	keys, err := store.AgentKeys(ctx, acc.ID)
	if err != nil {
		return countersign.Agent{}, err
	}
	for _, k := range keys {
		if k.Name == name && !k.Revoked() {
			return countersign.Agent{KeyID: k.ID, AccountID: acc.ID, KeyName: k.Name}, nil
		}
	}
	k, _, err := (&identity.Admin{Store: store}).CreateAgentKey(ctx, account, name)
	if err != nil {
		return countersign.Agent{}, fmt.Errorf("the gateway's key: %w", err)
	}
	return countersign.Agent{KeyID: k.ID, AccountID: acc.ID, KeyName: k.Name}, nil
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
