package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/claudehook"
	"github.com/countersign/countersign/internal/files"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/gctune"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/metrics"
	"github.com/countersign/countersign/internal/notify"
	"github.com/countersign/countersign/internal/saferm"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/store/sqlite"
)

// serveConfig is the configuration of countersign serve: each field is a
// flag, and COUNTERSIGN_<FLAG> in the environment sets its default.
type serveConfig struct {
	addr       string
	data       string
	dbURL      string // a PostgreSQL store shared with other replicas; wins over data
	publicURL  string
	ttl        time.Duration
	maxPending int
	rateLimit  int
	logLevel   string
	logFormat  string
	proxies    []netip.Prefix
	// notify holds the channels of the configuration file, applied at
	// start (COUNTERSIGN_NOTIFY_CONFIG).
	notify []notify.Spec
	// mcp is the MCP gateway's configuration (COUNTERSIGN_MCP_CONFIG);
	// nil: /mcp answers that none is configured.
	mcp *gateway.Config
	// keyFile is the secret key file; "": secret.key in the data
	// directory.
	keyFile string
	// stepUp names the approvals that need a passkey; stepUpSet says
	// the operator chose it (COUNTERSIGN_STEP_UP), which then requires
	// passkeys.
	stepUp    approval.StepUpPolicy
	stepUpSet bool
	// filesTTL and filesMaxMB bound file transfer (ADR 0008).
	filesTTL   time.Duration
	filesMaxMB int
	// replicaURL is where other replicas reach this one, for the files it
	// holds (PostgreSQL only; default http://ADDR).
	replicaURL string
	// maxLogMB bounds the SQLite store's write-ahead log, in MiB.
	maxLogMB int
	// claudeHook names the one account whose agent keys Claude Code's
	// HTTP hook at /api/v1/hooks/claude serves (COUNTERSIGN_CLAUDE_HOOK);
	// "": the hook is off.
	claudeHook string
	// retentionDays is how long finished requests are kept; 0: for ever.
	retentionDays int
	// teams is the teams configuration as read, checked against the
	// store at start; nil: none.
	teams *approval.TeamsFile
}

func runServe(ctx context.Context, env *Env, args []string) error {
	cfg, err := parseServe(env, args)
	if err != nil {
		return err
	}
	log, err := newLogger(env, cfg.logLevel, cfg.logFormat)
	if err != nil {
		return err
	}
	// The heap of a server under load is a few megabytes live: without a
	// floor the collector would run dozens of times a second.
	defer gctune.Default(gctune.ServeFloor)()
	store, storeName, closeStore, err := openServeStore(ctx, cfg.data, cfg.dbURL, storeKey{path: cfg.keyFile, notice: env.Stderr}, log,
		sqlite.WithMaxLog(int64(cfg.maxLogMB)<<20))
	if err != nil {
		return err
	}
	defer closeStore()

	// The teams file is checked before the first start too, against the
	// account and admin it would make, so that a mistake stops the start
	// before any secret is printed or anything is stored.
	if cfg.teams != nil {
		if _, err := cfg.teams.Resolve(ctx, firstStartView{store}); err != nil {
			return fmt.Errorf("%w: %v (COUNTERSIGN_TEAMS_CONFIG or --teams-config)", ErrUsage, err)
		}
	}
	// Listen before the first start, so that a taken port fails before any
	// secret is printed.
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen on %s (set COUNTERSIGN_ADDR or --addr): %w", cfg.addr, err)
	}
	if err := firstStart(ctx, env, store); err != nil {
		ln.Close()
		return err
	}
	if err := applyNotifyConfig(ctx, store, cfg.notify, log); err != nil {
		ln.Close()
		return err
	}
	public, err := publicURL(cfg.publicURL, ln.Addr().String())
	if err != nil {
		ln.Close()
		return err
	}

	reg := metrics.NewRegistry()
	hub := approval.NewHub()
	stepUp, err := stepUpPolicy(cfg, public, log)
	if err != nil {
		ln.Close()
		return err
	}
	var teams *approval.Teams
	if cfg.teams != nil {
		if teams, err = cfg.teams.Resolve(ctx, store); err != nil {
			ln.Close()
			return fmt.Errorf("%w: %v (COUNTERSIGN_TEAMS_CONFIG or --teams-config)", ErrUsage, err)
		}
	}
	shared, err := approval.RecordTeams(ctx, store, teams, log)
	if err != nil {
		ln.Close()
		return err
	}
	svc := approval.New(store, nil, hub, approval.Config{TTL: cfg.ttl, MaxPending: cfg.maxPending, StepUp: stepUp, Teams: teams, SharedTeams: shared, Notifier: notify.NewNotifier(store)}, log, approval.NewMetrics(reg, hub))
	fileStore, err := openFiles(ctx, cfg, store, ln.Addr().String(), log)
	if err != nil {
		ln.Close()
		return err
	}
	mcpHandler, stopMCP, err := startMCP(ctx, cfg.mcp, store, svc, public, fileStore, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopMCP()
	var claudeHook server.ClaudeHook
	var hookAccount string
	if cfg.claudeHook != "" {
		acc, err := store.AccountByName(ctx, cfg.claudeHook)
		if err != nil {
			ln.Close()
			if countersign.ErrorCode(err) == countersign.ENOTFOUND {
				return fmt.Errorf("%w: --claude-hook %q (COUNTERSIGN_CLAUDE_HOOK): there is no such account; name the account whose agent keys the hook serves", ErrUsage, cfg.claudeHook)
			}
			return err
		}
		claudeHook, hookAccount = &claudehook.HTTPHook{Load: saferm.LoadOptions{Getenv: env.Getenv}}, acc.ID
	}
	srv, err := server.New(server.Config{PublicURL: public, RatePerMinute: cfg.rateLimit, TrustedProxies: cfg.proxies, MCP: mcpHandler, MCPMaxBody: gateway.MaxBody, Files: fileStore,
		ClaudeHook: claudeHook, ClaudeHookAccount: hookAccount}, svc,
		&identity.Authenticator{Store: store}, reg, log)
	if err != nil {
		ln.Close()
		return err
	}

	sweepCtx, stopSweep := context.WithCancel(context.Background())
	defer stopSweep()
	go svc.RunSweeper(sweepCtx)
	if p, ok := store.(countersign.HistoryPruner); ok {
		ret := &approval.Retention{Store: p, Clock: countersign.SystemClock{}, Age: time.Duration(cfg.retentionDays) * 24 * time.Hour, Log: log}
		go ret.Run(sweepCtx)
	}
	stopFollow := followReplicas(svc, store, log)
	defer stopFollow()
	stopNotify := startNotifyWorker(store, public, log)
	defer stopNotify()

	log.Info("countersign listening", "addr", ln.Addr().String(), "public_url", public.String(), "store", storeName)
	err = srv.Serve(ctx, ln)
	log.Info("countersign stopped")
	return err
}

// minRequestTTL is the shortest --request-ttl. It is a string so that the
// end-to-end tests can build the binary with a shorter one (-ldflags -X)
// and watch a request expire without waiting 10 s; releases keep 10s, which
// the usage message names.
var minRequestTTL = "10s"

func parseServe(env *Env, args []string) (*serveConfig, error) {
	cfg := &serveConfig{}
	fs := newFlags(env, "serve")
	fs.StringVar(&cfg.addr, "addr", envOr(env, "COUNTERSIGN_ADDR", "127.0.0.1:8080"), "address to listen on (COUNTERSIGN_ADDR)")
	fs.StringVar(&cfg.data, "data", dataDir(env, ""), "data directory (COUNTERSIGN_DATA)")
	keyFile := fs.String("secret-key-file", "", keyFileHelp)
	dbURL := fs.String("database-url", "", "PostgreSQL store shared by replicas, such as postgres://user@host/db; wins over --data (COUNTERSIGN_DATABASE_URL, COUNTERSIGN_DATABASE_URL_FILE)")
	fs.StringVar(&cfg.publicURL, "public-url", env.Getenv("COUNTERSIGN_PUBLIC_URL"), "URL where people reach the server (COUNTERSIGN_PUBLIC_URL; default http://ADDR)")
	ttl := fs.String("request-ttl", envOr(env, "COUNTERSIGN_REQUEST_TTL", "10m"), "how long a request waits for a decision (COUNTERSIGN_REQUEST_TTL)")
	maxPending := fs.String("max-pending", envOr(env, "COUNTERSIGN_MAX_PENDING", "5"), "requests an account may have waiting at once (COUNTERSIGN_MAX_PENDING)")
	rate := fs.String("rate-limit", envOr(env, "COUNTERSIGN_RATE_LIMIT", "1200"), "API requests per minute per client address, 0 for none (COUNTERSIGN_RATE_LIMIT)")
	proxies := fs.String("trusted-proxies", env.Getenv("COUNTERSIGN_TRUSTED_PROXIES"), "comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-For is believed (COUNTERSIGN_TRUSTED_PROXIES)")
	fs.StringVar(&cfg.logLevel, "log-level", envOr(env, "COUNTERSIGN_LOG_LEVEL", "info"), "debug, info, warn or error (COUNTERSIGN_LOG_LEVEL)")
	fs.StringVar(&cfg.logFormat, "log-format", envOr(env, "COUNTERSIGN_LOG_FORMAT", "text"), "text or json (COUNTERSIGN_LOG_FORMAT)")
	notifyConfig := fs.String("notify-config", env.Getenv("COUNTERSIGN_NOTIFY_CONFIG"), "TOML file of notification channels, applied at start (COUNTERSIGN_NOTIFY_CONFIG)")
	stepUp := fs.String("step-up", env.Getenv("COUNTERSIGN_STEP_UP"), `approvals that need a passkey: rules "kind=mcp,tier=commit; kind=rm,protected=true; window", or "none" (COUNTERSIGN_STEP_UP; default: MCP commit and external tiers, deletes of protected paths, every auto-approve window)`)
	filesTTL := fs.String("files-ttl", envOr(env, "COUNTERSIGN_FILES_TTL", "30m"), "how long uploads and download links live (COUNTERSIGN_FILES_TTL)")
	filesMax := fs.String("files-max-mb", env.Getenv("COUNTERSIGN_FILES_MAX_MB"), "MiB for every account's uploads and links together; default 256 on disk, 64 in memory (COUNTERSIGN_FILES_MAX_MB)")
	fs.StringVar(&cfg.replicaURL, "replica-url", env.Getenv("COUNTERSIGN_REPLICA_URL"), "with PostgreSQL: the URL where other replicas reach this one for the files it holds (COUNTERSIGN_REPLICA_URL; default http://ADDR)")
	retention := fs.String("retention-days", envOr(env, "COUNTERSIGN_RETENTION_DAYS", "90"), "days finished requests are kept, with their links and notifications (the audit log keeps every entry); 0 keeps them for ever (COUNTERSIGN_RETENTION_DAYS)")
	maxLog := fs.String("sqlite-log-mb", envOr(env, "COUNTERSIGN_SQLITE_LOG_MB", "32"), "with SQLite: MiB the write-ahead log may take before it is copied into the database and truncated, 1 to 64 (COUNTERSIGN_SQLITE_LOG_MB)")
	teamsConfig := fs.String("teams-config", env.Getenv("COUNTERSIGN_TEAMS_CONFIG"), "TOML file of approver groups and rules: who may decide which requests, and which need several approvers (COUNTERSIGN_TEAMS_CONFIG)")
	mcpConfig := fs.String("mcp-config", env.Getenv("COUNTERSIGN_MCP_CONFIG"), "TOML file of the MCP gateway at /mcp: upstreams, tier rules, per-key policy (COUNTERSIGN_MCP_CONFIG)")
	claudeHook := fs.String("claude-hook", env.Getenv("COUNTERSIGN_CLAUDE_HOOK"), "ACCOUNT: answer Claude Code's HTTP hook at /api/v1/hooks/claude for the agent keys of this one account, from this machine only, with the hook policy of this machine's user; only for a server on the machine where Claude Code runs, as the same user (COUNTERSIGN_CLAUDE_HOOK=ACCOUNT)")
	for i, a := range args {
		if a == "--" {
			break
		}
		if (a == "--claude-hook" || a == "-claude-hook") && (i+1 == len(args) || strings.HasPrefix(args[i+1], "-")) {
			return nil, claudeHookUsage("")
		}
	}
	rest, err := parse(fs, args)
	if err != nil {
		return nil, err
	}
	hookSet := *claudeHook != ""
	fs.Visit(func(f *flag.Flag) { hookSet = hookSet || f.Name == "claude-hook" })
	if hookSet {
		switch strings.ToLower(*claudeHook) {
		case "", "1", "0", "true", "false", "yes", "no", "on", "off":
			return nil, claudeHookUsage(*claudeHook)
		}
		if err := identity.ValidName("the account of --claude-hook", *claudeHook); err != nil {
			return nil, fmt.Errorf("%w: %v (COUNTERSIGN_CLAUDE_HOOK or --claude-hook)", ErrUsage, err)
		}
		cfg.claudeHook = *claudeHook
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q", ErrUsage, rest[0])
	}
	if cfg.dbURL, err = databaseURL(env, *dbURL); err != nil {
		return nil, err
	}
	cfg.keyFile = keyOf(env, *keyFile).path
	// Check the address and the public URL here, before the store is
	// opened: a configuration mistake must not create the data directory
	// or print the first start's secrets.
	if err := checkAddr(cfg.addr); err != nil {
		return nil, err
	}
	if cfg.publicURL != "" {
		if _, err := publicURL(cfg.publicURL, cfg.addr); err != nil {
			return nil, err
		}
	}
	floor, _ := time.ParseDuration(minRequestTTL)
	if cfg.ttl, err = time.ParseDuration(*ttl); err != nil || cfg.ttl < floor || cfg.ttl > 24*time.Hour {
		return nil, fmt.Errorf("%w: request TTL %q must be a duration from 10s to 24h, such as 10m", ErrUsage, *ttl)
	}
	if cfg.maxPending, err = strconv.Atoi(*maxPending); err != nil || cfg.maxPending < 1 || cfg.maxPending > 10000 {
		return nil, fmt.Errorf("%w: max pending %q must be a number from 1 to 10000", ErrUsage, *maxPending)
	}
	if cfg.maxLogMB, err = strconv.Atoi(*maxLog); err != nil || cfg.maxLogMB < 1 || cfg.maxLogMB > 64 {
		return nil, fmt.Errorf("%w: SQLite log MB %q must be a number of MiB from 1 to 64", ErrUsage, *maxLog)
	}
	if cfg.retentionDays, err = strconv.Atoi(*retention); err != nil || cfg.retentionDays < 0 || cfg.retentionDays > 36500 {
		return nil, fmt.Errorf("%w: retention days %q must be a number of days from 0 (keep for ever) to 36500", ErrUsage, *retention)
	}
	if cfg.rateLimit, err = strconv.Atoi(*rate); err != nil || cfg.rateLimit < 0 {
		return nil, fmt.Errorf("%w: rate limit %q must be a number of requests per minute, 0 for none", ErrUsage, *rate)
	}
	if cfg.proxies, err = parseProxies(*proxies); err != nil {
		return nil, err
	}
	if cfg.stepUp, err = approval.ParseStepUp(*stepUp); err != nil {
		return nil, fmt.Errorf("%w: %v (COUNTERSIGN_STEP_UP or --step-up)", ErrUsage, err)
	}
	cfg.stepUpSet = strings.TrimSpace(*stepUp) != "" && strings.TrimSpace(*stepUp) != "none"
	if cfg.filesTTL, err = time.ParseDuration(*filesTTL); err != nil || cfg.filesTTL < time.Minute || cfg.filesTTL > 24*time.Hour {
		return nil, fmt.Errorf("%w: files TTL %q must be a duration from 1m to 24h, such as 30m", ErrUsage, *filesTTL)
	}
	if *filesMax != "" {
		if cfg.filesMaxMB, err = strconv.Atoi(*filesMax); err != nil || cfg.filesMaxMB < 2*files.MaxUpload>>20 || cfg.filesMaxMB > 1<<20 {
			return nil, fmt.Errorf("%w: files max MB %q must be a number of MiB from %d (two uploads) to 1048576", ErrUsage, *filesMax, 2*files.MaxUpload>>20)
		}
	}
	if *notifyConfig != "" {
		if cfg.notify, err = notify.LoadFile(*notifyConfig); err != nil {
			return nil, err
		}
	}
	if *teamsConfig != "" {
		if cfg.teams, err = approval.LoadTeams(*teamsConfig); err != nil {
			return nil, fmt.Errorf("%w: %v (COUNTERSIGN_TEAMS_CONFIG or --teams-config)", ErrUsage, err)
		}
	}
	if *mcpConfig != "" {
		if cfg.mcp, err = gateway.LoadConfig(*mcpConfig); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// claudeHookUsage is the usage error of a --claude-hook without an
// account: the hook serves the keys of one account, which must be named.
func claudeHookUsage(v string) error {
	return fmt.Errorf("%w: --claude-hook %q: name the one account whose agent keys Claude Code's HTTP hook serves, such as --claude-hook default (COUNTERSIGN_CLAUDE_HOOK=default)", ErrUsage, v)
}

// parseProxies reads a comma-separated list of addresses and CIDRs.
func parseProxies(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
		} else if a, err := netip.ParseAddr(f); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		} else {
			return nil, fmt.Errorf("%w: trusted proxy %q must be an address or a CIDR such as 10.0.0.0/8", ErrUsage, f)
		}
	}
	return out, nil
}

// checkAddr checks that addr is a host (or nothing) and a port number.
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%w: listen address %q (COUNTERSIGN_ADDR or --addr) must be host:port, such as 127.0.0.1:8080", ErrUsage, addr)
	}
	return nil
}

// publicURL parses the configured public URL, or builds one from the
// listening address.
func publicURL(configured, listening string) (*url.URL, error) {
	if configured == "" {
		return &url.URL{Scheme: "http", Host: listening}, nil
	}
	u, err := url.Parse(strings.TrimRight(configured, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: COUNTERSIGN_PUBLIC_URL %q must be an http or https URL such as https://approve.example.com", ErrUsage, configured)
	}
	return u, nil
}

func newLogger(env *Env, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("%w: log level %q must be debug, info, warn or error", ErrUsage, level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(env.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(env.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("%w: log format %q must be text or json", ErrUsage, format)
}

// firstStart sets up an empty store with the account "default", the
// approver "admin" and one agent key, and prints their secrets once, to
// standard output and never to the log.
// firstStartView is the store as the teams file sees it before the first
// start: a store that has no account yet answers as if the first start had
// made the account "default" with its admin. A store with accounts answers
// as it is.
type firstStartView struct{ store countersign.Store }

// The account and the approver the first start makes.
const (
	firstAccount = "default"
	firstAdmin   = "admin"
)

// firstStartAccount is the id the view gives the account the first start
// would make; it names no stored account.
const firstStartAccount = "acc_first_start"

func (v firstStartView) AccountByName(ctx context.Context, name string) (*countersign.Account, error) {
	accounts, err := v.store.Accounts(ctx)
	if err != nil {
		return nil, err
	}
	if len(accounts) == 0 && name == firstAccount {
		return &countersign.Account{ID: firstStartAccount, Name: name}, nil
	}
	return v.store.AccountByName(ctx, name)
}

func (v firstStartView) Members(ctx context.Context, accountID string) ([]*countersign.Member, error) {
	if accountID == firstStartAccount {
		return []*countersign.Member{{Username: firstAdmin, Role: countersign.RoleAdmin}}, nil
	}
	return v.store.Members(ctx, accountID)
}

func firstStart(ctx context.Context, env *Env, store countersign.Store) error {
	accounts, err := store.Accounts(ctx)
	if err != nil || len(accounts) > 0 {
		return err
	}
	admin := &identity.Admin{Store: store}
	if _, err := admin.CreateAccount(ctx, firstAccount); countersign.ErrorCode(err) == countersign.ECONFLICT {
		return nil // another replica on the same database is doing the first start
	} else if err != nil {
		return err
	}
	password := identity.NewPassword()
	if _, err := admin.CreateApprover(ctx, firstAccount, firstAdmin, password, countersign.RoleAdmin); err != nil {
		return err
	}
	_, key, err := admin.CreateAgentKey(ctx, "default", "default")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(env.Stdout, `
countersign: first start. Created the account "default" with:

  approver   admin
  password   %s
  agent key  %s

These are shown once and stored only as hashes. Keep them now.
Create an approver API token for the terminal client with:
  countersign token create --approver admin

`, password, key)
	if err != nil {
		// Stored only as hashes, the secrets are lost unless printed.
		return fmt.Errorf("the first start could not print the admin password and the agent key (%v); "+
			"set a password with countersign approver passwd --username admin and create a key with countersign key create", err)
	}
	return nil
}

// stepUpPolicy is the step-up policy the server runs with. Passkeys need a
// public URL with a host name: without one, a policy the operator chose
// stops the start (it could never be met, and nothing could be approved),
// and the default policy is off, with a warning, so that a loopback setup
// on an IP address keeps working.
func stepUpPolicy(cfg *serveConfig, public *url.URL, log *slog.Logger) (approval.StepUpPolicy, error) {
	if err := protocolRPID(public); err == nil {
		return cfg.stepUp, nil
	} else if cfg.stepUpSet {
		return approval.StepUpPolicy{}, fmt.Errorf("%w: COUNTERSIGN_STEP_UP needs passkeys, and %v", ErrUsage, err)
	} else if cfg.stepUp.Active() {
		log.Warn("approvals need no passkey: passkeys need a public URL with a host name", "public_url", public.String())
	}
	return approval.StepUpPolicy{}, nil
}

// protocolRPID checks that the public URL can be a passkeys' relying party.
func protocolRPID(public *url.URL) error {
	_, err := identity.NewPasskeys(nil, nil, nil, public)
	return err
}
