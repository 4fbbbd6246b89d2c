package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/datadir"
	"github.com/countersign/countersign/internal/files"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/gateway/confirm"
	"github.com/countersign/countersign/internal/gctune"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/store/sqlite"
)

// mcpUsage is the usage of `countersign mcp`.
const mcpUsage = `usage: countersign mcp [--config FILE] --upstream 'CMD ARGS' | --upstream URL [--header 'Name: value']... [--upstream …]

Serves MCP over stdio in front of the upstream servers. Tools of the commit and
external tiers run only after a human approves the exact call: through the
countersign server named by COUNTERSIGN_URL (with the agent key COUNTERSIGN_KEY
or COUNTERSIGN_KEY_FILE), or, with no server, through the MCP client's
elicitation or a confirmation page on 127.0.0.1.

An upstream may be named: --upstream 'fs=npx -y @modelcontextprotocol/server-filesystem /srv'.`

// upstreamFlags collects --upstream and --header in order: a header belongs
// to the URL upstream before it.
type upstreamFlags struct {
	list []gateway.UpstreamConfig
}

func (u *upstreamFlags) String() string { return "" }

func (u *upstreamFlags) Set(v string) error {
	var c gateway.UpstreamConfig
	if name, rest, ok := strings.Cut(v, "="); ok && !strings.ContainsAny(name, " /:\"'") {
		c.Name, v = name, rest
	}
	if strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://") {
		c.URL = strings.TrimSpace(v)
	} else {
		words, err := gateway.SplitCommand(v)
		if err != nil {
			return err
		}
		c.Command = words
	}
	u.list = append(u.list, c)
	return nil
}

type headerFlag struct{ u *upstreamFlags }

func (h headerFlag) String() string { return "" }

func (h headerFlag) Set(v string) error {
	if len(h.u.list) == 0 || h.u.list[len(h.u.list)-1].URL == "" {
		return fmt.Errorf("--header must follow an --upstream URL")
	}
	name, value, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("--header must look like 'Name: value'")
	}
	last := &h.u.list[len(h.u.list)-1]
	if last.Headers == nil {
		last.Headers = map[string]string{}
	}
	last.Headers[strings.TrimSpace(name)] = strings.TrimSpace(value)
	return nil
}

// runMCP is `countersign mcp`, the stdio MCP gateway.
func runMCP(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "mcp")
	fs.Usage = func() { fmt.Fprintln(env.Stderr, mcpUsage); fs.PrintDefaults() }
	configFile := fs.String("config", env.Getenv("COUNTERSIGN_MCP_CONFIG"), "TOML file of upstreams, tier rules and the policy (COUNTERSIGN_MCP_CONFIG)")
	serverURL := fs.String("server", env.Getenv("COUNTERSIGN_URL"), "countersign server to ask (COUNTERSIGN_URL); none: standalone")
	logLevel := fs.String("log-level", envOr(env, "COUNTERSIGN_LOG_LEVEL", "info"), "debug, info, warn or error, to stderr (COUNTERSIGN_LOG_LEVEL)")
	ups := &upstreamFlags{}
	fs.Var(ups, "upstream", "an upstream MCP server: 'CMD ARGS' over stdio, or an http(s) URL; repeatable")
	fs.Var(headerFlag{ups}, "header", "'Name: value' sent to the URL upstream before it; ${VAR} comes from the environment")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("%w: unexpected argument %q; quote each upstream command: --upstream 'CMD ARGS'", ErrUsage, rest[0])
	}
	cfg := gateway.NewConfig()
	if *configFile != "" {
		if cfg, err = gateway.LoadConfig(*configFile); err != nil {
			return err
		}
	}
	cfg.Upstreams = append(cfg.Upstreams, ups.list...)
	if len(cfg.Upstreams) == 0 {
		return fmt.Errorf("%w: no upstream: give --upstream 'CMD ARGS' or an [[upstream]] in --config\n\n%s", ErrUsage, mcpUsage)
	}
	if err := cfg.Check(); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	log, err := newLogger(env, *logLevel, "text")
	if err != nil {
		return err
	}
	// Each call forwarded leaves the MCP library's JSON buffers behind:
	// without a floor the collector would run every few calls.
	defer gctune.Default(gctune.MCPFloor)()
	g, closeGateway, err := newStdioGateway(ctx, env, cfg, *serverURL, log)
	if err != nil {
		return err
	}
	defer closeGateway()
	g.Start(ctx, 20*time.Second)
	defer g.Close()
	return g.ServeStdio(ctx, io.NopCloser(env.Stdin), nopWriteCloser{env.Stdout})
}

// newStdioGateway builds the gateway for a server, or standalone when none
// is named. A server without a key fails closed at start.
func newStdioGateway(ctx context.Context, env *Env, cfg *gateway.Config, serverURL string, log *slog.Logger) (*gateway.Gateway, func(), error) {
	key, err := secretFromEnv(env, "COUNTERSIGN_KEY")
	if err != nil {
		return nil, nil, err
	}
	if serverURL == "" {
		if key != "" {
			log.Warn("COUNTERSIGN_KEY is set but no server: running standalone; set COUNTERSIGN_URL to ask the server")
		}
		return newStandalone(ctx, env, cfg, log)
	}
	if key == "" {
		return nil, nil, fmt.Errorf("%w: COUNTERSIGN_URL is set but no agent key: set COUNTERSIGN_KEY or COUNTERSIGN_KEY_FILE", ErrUsage)
	}
	if _, err := publicURL(serverURL, ""); err != nil {
		return nil, nil, fmt.Errorf("%w: COUNTERSIGN_URL %q must be an http or https URL", ErrUsage, serverURL)
	}
	g, err := confirm.NewForClient(cfg, client.New(serverURL, key), log, env.Stderr)
	return g, func() {}, err
}

// newStandalone builds the gateway without a server on a store of its own:
// SQLite in the configured data directory, which keeps the audit log, or
// in a temporary one that is removed when the gateway closes.
func newStandalone(ctx context.Context, env *Env, cfg *gateway.Config, log *slog.Logger) (*gateway.Gateway, func(), error) {
	dir, cleanup, err := standaloneDir(cfg.Data, log)
	if err != nil {
		return nil, nil, err
	}
	store, err := sqlite.Open(ctx, filepath.Join(dir, "countersign.db"))
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("open the gateway's store in %s: %w", dir, err)
	}
	g, closeGateway, err := StandaloneGateway(ctx, cfg, store, confirm.StandaloneOptions{
		Pages: filepath.Join(dir, "pages"), Log: log, Stderr: env.Stderr})
	if err != nil {
		store.Close()
		cleanup()
		return nil, nil, err
	}
	return g, func() {
		closeGateway()
		store.Close()
		cleanup()
	}, nil
}

// standaloneDir returns the configured data directory, created or
// tightened as every command does (datadir.Prepare), or a temporary one
// that cleanup removes.
func standaloneDir(configured string, log *slog.Logger) (dir string, cleanup func(), err error) {
	if configured != "" {
		if err := datadir.Prepare(configured, log); err != nil {
			return "", nil, err
		}
		return configured, func() {}, nil
	}
	dir, err = os.MkdirTemp("", "countersign-mcp-")
	if err != nil {
		return "", nil, fmt.Errorf("create a temporary directory for the gateway: %w", err)
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// startMCP starts the MCP gateway of countersign serve when it is
// configured, and returns its /mcp handler (nil when not) and the function
// that stops its upstreams. Request states are sealed under a server key
// that every replica shares.
func startMCP(ctx context.Context, cfg *gateway.Config, store countersign.Store, svc *approval.Service, public *url.URL, fileStore *files.Store, log *slog.Logger) (http.Handler, func(), error) {
	if cfg == nil {
		return nil, func() {}, nil
	}
	// The [keys] name agent keys of this store: each must name exactly
	// one, or the server does not start.
	if err := cfg.ResolveKeys(ctx, store); err != nil {
		return nil, nil, err
	}
	key, err := store.ServerKey(ctx, "mcp-request-state", 32)
	if err != nil {
		return nil, nil, fmt.Errorf("read the MCP request state key: %w", err)
	}
	g, err := confirm.NewForServer(cfg, svc, public, key, log.With("component", "mcp"))
	if err != nil {
		return nil, nil, err
	}
	g.UseFiles(fileStore, public)
	g.Start(ctx, 10*time.Second)
	// The gateway takes agent keys and the OAuth access tokens issued for
	// this server's /mcp.
	resource := strings.TrimRight(public.String(), "/") + "/mcp"
	return g.HTTPHandler((&identity.Authenticator{Store: store}).MCPAgent(resource, countersign.SystemClock{})), g.Close, nil
}
