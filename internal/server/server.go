// Package server is countersign's HTTP face: the v1 JSON API, health and
// metrics. Handlers decode, call the approval service and render; no rule
// lives here.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/files"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/metrics"
	"github.com/countersign/countersign/internal/ratelimit"
	"github.com/countersign/countersign/internal/web"
)

// Config is what the server needs besides its services.
type Config struct {
	// PublicURL is where humans reach the server, such as
	// https://approve.example.com; links and the inbox URL are built on it.
	PublicURL *url.URL
	// RatePerMinute is how many API requests one client address may make
	// in a minute (0: no limit).
	RatePerMinute int
	// MaxWait bounds a long poll (default 60 s).
	MaxWait time.Duration
	// Store is where sessions and the server's keys live; nil: the
	// authenticator's store.
	Store countersign.Store
	// TrustedProxies are the addresses of reverse proxies whose
	// X-Forwarded-For names the client.
	TrustedProxies []netip.Prefix
	// MCP is the MCP gateway's streamable HTTP handler, served at /mcp
	// (see mcp.go); nil: no MCP upstreams are configured.
	MCP http.Handler
	// MCPMaxBody refuses at once, with the API's JSON error, an MCP
	// request that declares a larger body; the gateway bounds the bodies
	// it reads on its own. 0: no such check.
	MCPMaxBody int64
	// Clock is the time of the sign-in limits and sessions (nil: the
	// system's).
	Clock countersign.Clock
	// PasswordSlots are where sign-ins wait to have their password checked
	// (nil: the process's argon2id slots), at most SignInWait each
	// (default 1 s) before they are answered 429.
	PasswordSlots *identity.HashSlots
	SignInWait    time.Duration
	// Files keeps the upload pages, uploads and download links of ADR
	// 0008; nil: /uploads and /files answer that file transfer is off.
	Files *files.Store
	// UploadLimits bound how an upload body arrives; zero:
	// DefaultBodyLimits.
	UploadLimits BodyLimits
	// MaxOAuthClients is the most registered OAuth clients the server
	// keeps (0: identity.DefaultMaxClients).
	MaxOAuthClients int
	// ClaudeHook answers Claude Code's HTTP hook at POST
	// /api/v1/hooks/claude (hooks.go); nil: that route denies every call,
	// saying the server does not answer hooks.
	ClaudeHook ClaudeHook
	// ClaudeHookAccount is the ID of the one account whose agent keys the
	// HTTP hook serves (countersign serve --claude-hook ACCOUNT): the
	// policy runs on this machine's files, so a key of any other account
	// is denied. Required with ClaudeHook.
	ClaudeHookAccount string
}

// Server holds the handlers' dependencies.
type Server struct {
	cfg      Config
	service  *approval.Service
	auth     *identity.Authenticator
	log      *slog.Logger
	registry *metrics.Registry
	limiter  *ratelimit.Keyed
	signins  *signinLimiter
	sessions *identity.Sessions
	// passkeys runs the WebAuthn ceremonies; nil when the public URL
	// cannot carry them (an IP address is no relying party id).
	passkeys   *identity.Passkeys
	ceremonies *ceremonyLimiter
	oauth      *identity.OAuth
	pages      *web.Pages
	csrfKey    []byte
	// deviceKey signs device cookies (device.go).
	deviceKey []byte
	// registrations and oauthRate limit the OAuth endpoints per client
	// address, whatever the API's rate.
	registrations, oauthRate *ratelimit.Keyed
	started                  time.Time

	httpRequests *metrics.CounterVec
	handler      http.Handler
}

// New returns a server. reg is where the service's metrics are registered
// too, so that /metrics shows both. It fails when a page template is broken
// or the store cannot give the server its cookie keys.
func New(cfg Config, service *approval.Service, auth *identity.Authenticator, reg *metrics.Registry, log *slog.Logger) (*Server, error) {
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 60 * time.Second
	}
	if cfg.PublicURL == nil {
		cfg.PublicURL = &url.URL{Scheme: "http", Host: "127.0.0.1:8080"}
	}
	if cfg.Store == nil {
		cfg.Store = auth.Store
	}
	if cfg.Clock == nil {
		cfg.Clock = countersign.SystemClock{}
	}
	if cfg.SignInWait <= 0 {
		cfg.SignInWait = time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.ClaudeHook != nil && cfg.ClaudeHookAccount == "" {
		return nil, errors.New("the Claude Code hook needs the account it serves")
	}
	pages, err := web.Parse()
	if err != nil {
		return nil, fmt.Errorf("parse the page templates: %w", err)
	}
	csrfKey, err := cfg.Store.ServerKey(context.Background(), "csrf", 32)
	if err != nil {
		return nil, fmt.Errorf("read the CSRF key: %w", err)
	}
	deviceKey, err := cfg.Store.ServerKey(context.Background(), "device", 32)
	if err != nil {
		return nil, fmt.Errorf("read the device cookie key: %w", err)
	}
	s := &Server{
		cfg: cfg, service: service, auth: auth, log: log, registry: reg,
		limiter:  ratelimit.New(cfg.RatePerMinute),
		signins:  newSigninLimiter(),
		sessions: &identity.Sessions{Store: cfg.Store, Clock: cfg.Clock, Slots: cfg.PasswordSlots, SlotWait: cfg.SignInWait},
		oauth: &identity.OAuth{Store: cfg.Store, Clock: cfg.Clock, MaxClients: cfg.MaxOAuthClients,
			Resource: strings.TrimRight(cfg.PublicURL.String(), "/") + "/mcp"},
		registrations: ratelimit.New(30),
		oauthRate:     ratelimit.New(120),
		pages:         pages,
		csrfKey:       csrfKey,
		deviceKey:     deviceKey,
		started:       time.Now(),
		httpRequests: reg.NewCounterVec("countersign_http_requests_total",
			"HTTP requests by route and status code.", "route", "code"),
	}
	if pk, err := identity.NewPasskeys(cfg.Store, countersign.SystemClock{}, s.sessions, cfg.PublicURL); err == nil {
		s.passkeys = pk
	} else {
		log.Warn("passkeys are off", "reason", err.Error())
	}
	s.ceremonies = newCeremonyLimiter()
	if st, ok := cfg.Store.(countersign.StatsReporter); ok {
		// A second server on the same registry (tests) finds the
		// store's metrics there already.
		reg.Register(metrics.NewStoreCollector(st))
	}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the root handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve answers on ln until ctx is done, then shuts down gracefully: waiting
// long polls are answered at once with the request's current state, and
// requests in flight may finish for up to 10 seconds.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      15 * time.Second, // long polls extend their own
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    32 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.service.Hub().Close()
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdown)
	if e := <-errc; e != nil && !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}

// inboxURL is the inbox page of a request.
func (s *Server) inboxURL(id string) string {
	return strings.TrimRight(s.cfg.PublicURL.String(), "/") + "/approvals/" + url.PathEscape(id)
}

// clientAddr is the client's address: the connection's, or, when the
// connection comes from a trusted proxy, the nearest address in
// X-Forwarded-For that is not a trusted proxy.
func (s *Server) clientAddr(r *http.Request) string {
	if len(s.cfg.TrustedProxies) == 0 {
		return clientAddr(r)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || !s.trusted(addr) {
		return clientAddr(r)
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := hopAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break // a garbled header: count the proxy itself
		}
		if !s.trusted(a) {
			return addrKey(a)
		}
	}
	return clientAddr(r)
}

// hopAddr reads one hop of X-Forwarded-For: an address, or an address
// and port, as some proxies write it ("203.0.113.7:41234", "[2001:db8::1]:443").
func hopAddr(hop string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(hop); err == nil {
		return a, nil
	}
	ap, err := netip.ParseAddrPort(hop)
	return ap.Addr(), err
}

func (s *Server) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// addrKey is the key a limit counts an address under: IPv6 by its /64.
func addrKey(a netip.Addr) string {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// clientAddr is the address a limit counts against: the connection's IP,
// with IPv6 addresses reduced to their /64, which one client usually holds
// whole.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}
