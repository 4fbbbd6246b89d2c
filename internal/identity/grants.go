package identity

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/visible"
)

// The lifetimes of OAuth credentials: codes are short-lived, access tokens
// last about an hour, refresh tokens are rotated on every use.
const (
	CodeTTL    = time.Minute
	AccessTTL  = time.Hour
	RefreshTTL = 30 * 24 * time.Hour
	// ClientStaleTTL: a client never used is deleted after it. Minutes,
	// not hours: a flood of registrations is gone soon, and a client that
	// is real is allowed (and so used) within them, or registers again.
	ClientStaleTTL = 10 * time.Minute
)

// The default bounds of registration: the clients the server keeps, and
// the never-used ones an address (IPv6: a /64) or a network (IPv6: a /48)
// may hold.
const (
	DefaultMaxClients        = 10000
	DefaultClientsPerAddress = 20
	DefaultClientsPerNetwork = 50
)

// GrantTiers are the tiers a grant may carry, lowest first; they are also
// the OAuth scopes the server knows.
var GrantTiers = []string{"read", "write", "commit", "external"}

// OAuth is the authorization server of ADR 0007's grants: client
// registration, consent, codes and tokens. Every rule about them is here;
// the HTTP endpoints decode and render.
type OAuth struct {
	Store countersign.Store
	Clock countersign.Clock
	// Resource is the only resource tokens are issued for: <public URL>/mcp.
	Resource string
	// MaxClients, ClientsPerAddress and ClientsPerNetwork bound
	// registration (0: the defaults).
	MaxClients, ClientsPerAddress, ClientsPerNetwork int
}

// OAuthError is an error of the OAuth protocol: one of the standard codes
// (RFC 6749, 7009, 7591) and a description safe to show.
type OAuthError struct {
	Code        string
	Description string
	// Revoked is the grant the refused request revoked (a replay), for
	// the log; "" when it revoked nothing.
	Revoked string
}

// Error returns the code and the description.
func (e *OAuthError) Error() string { return e.Code + ": " + e.Description }

func oauthErr(code, desc string) error { return &OAuthError{Code: code, Description: desc} }

// ClientMetadata is what a client sends to register (RFC 7591).
type ClientMetadata struct {
	RedirectURIs            []string `json:"redirect_uris"`
	ClientName              string   `json:"client_name,omitempty"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	Scope                   string   `json:"scope,omitempty"`
	ClientURI               string   `json:"client_uri,omitempty"`
	LogoURI                 string   `json:"logo_uri,omitempty"`
	TOSURI                  string   `json:"tos_uri,omitempty"`
	PolicyURI               string   `json:"policy_uri,omitempty"`
	SoftwareID              string   `json:"software_id,omitempty"`
	SoftwareVersion         string   `json:"software_version,omitempty"`
}

// Register validates a client's metadata and stores the client. from is
// the client address as the limits count it (an IPv6 address by its /64,
// "2001:db8:1:2::/64"); an IPv6 one is counted by its /48 too. It returns
// the client and, for a confidential client, its secret, shown only now.
// Errors: *OAuthError invalid_redirect_uri or invalid_client_metadata;
// ELIMIT.
func (o *OAuth) Register(ctx context.Context, m *ClientMetadata, from string) (*countersign.OAuthClient, string, error) {
	if err := validMetadata(m); err != nil {
		return nil, "", err
	}
	now := o.Clock.Now()
	c := &countersign.OAuthClient{
		ID: countersign.NewID("cli_"), Name: m.ClientName, RedirectURIs: m.RedirectURIs,
		AuthMethod: m.TokenEndpointAuthMethod, RegisteredFrom: from, RegisteredNet: NetworkOf(from), CreatedAt: now,
	}
	var secret string
	if c.AuthMethod != "none" {
		secret = countersign.NewSecret(countersign.ClientSecretPrefix)
		c.SecretHash = countersign.HashSecret(secret)
	}
	lim := countersign.ClientLimits{Max: orDefault(o.MaxClients, DefaultMaxClients),
		PerAddress: orDefault(o.ClientsPerAddress, DefaultClientsPerAddress), PerNetwork: orDefault(o.ClientsPerNetwork, DefaultClientsPerNetwork),
		StaleBefore: now.Add(-ClientStaleTTL)}
	if err := o.Store.CreateOAuthClient(ctx, c, lim); err != nil {
		return nil, "", err
	}
	return c, secret, nil
}

func orDefault(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// NetworkOf is the network a registration from the client address from
// is counted under as well: the /48 of an IPv6 address or /64, which one
// site usually holds whole (and with it 65 536 /64s); "" for anything
// else.
func NetworkOf(from string) string {
	a, err := netip.ParseAddr(from)
	if p, perr := netip.ParsePrefix(from); perr == nil {
		a, err = p.Addr(), nil
	}
	if err != nil || !a.Unmap().Is6() {
		return ""
	}
	p, _ := a.Unmap().Prefix(48)
	return p.String()
}

// validMetadata checks every value a client declared, and fills in the
// defaults of RFC 7591.
func validMetadata(m *ClientMetadata) error {
	if len(m.RedirectURIs) == 0 || len(m.RedirectURIs) > 10 {
		return oauthErr("invalid_redirect_uri", "redirect_uris must list between 1 and 10 URIs")
	}
	for _, u := range m.RedirectURIs {
		if err := ValidRedirectURI(u); err != nil {
			return err
		}
	}
	m.ClientName = strings.TrimSpace(m.ClientName)
	if m.ClientName == "" {
		m.ClientName = "Unnamed client"
	}
	// The name is shown on the consent page as the client's own words: a
	// character that displays as nothing or reorders the text (a bidi
	// override, a zero-width space) would let it show another name.
	if len(m.ClientName) > 100 || strings.IndexFunc(m.ClientName, visible.Hidden) >= 0 {
		return oauthErr("invalid_client_metadata", "client_name must be at most 100 printable characters, without invisible or text-reordering ones")
	}
	switch m.TokenEndpointAuthMethod {
	case "":
		m.TokenEndpointAuthMethod = "client_secret_basic" // RFC 7591's default
	case "none", "client_secret_basic", "client_secret_post":
	default:
		return oauthErr("invalid_client_metadata", "token_endpoint_auth_method must be none, client_secret_basic or client_secret_post")
	}
	if len(m.GrantTypes) == 0 {
		m.GrantTypes = []string{"authorization_code"}
	}
	for _, g := range m.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return oauthErr("invalid_client_metadata", "grant_types may hold only authorization_code and refresh_token")
		}
	}
	if !slices.Contains(m.GrantTypes, "authorization_code") {
		return oauthErr("invalid_client_metadata", "grant_types must include authorization_code")
	}
	if len(m.ResponseTypes) == 0 {
		m.ResponseTypes = []string{"code"}
	}
	for _, r := range m.ResponseTypes {
		if r != "code" {
			return oauthErr("invalid_client_metadata", "response_types may hold only code")
		}
	}
	if _, err := ParseScope(m.Scope); err != nil {
		return oauthErr("invalid_client_metadata", "scope may name only read, write, commit and external")
	}
	for _, u := range []string{m.ClientURI, m.LogoURI, m.TOSURI, m.PolicyURI} {
		if u == "" {
			continue
		}
		p, err := url.Parse(u)
		if err != nil || p.Scheme != "https" || p.Host == "" || len(u) > 2000 {
			return oauthErr("invalid_client_metadata", "client_uri, logo_uri, tos_uri and policy_uri must be https URLs")
		}
	}
	if len(m.SoftwareID) > 200 || len(m.SoftwareVersion) > 100 {
		return oauthErr("invalid_client_metadata", "software_id or software_version is too long")
	}
	return nil
}

// ValidRedirectURI accepts an absolute https URI, or an http one on a
// loopback address (RFC 8252), with no fragment and no user information.
// Errors: *OAuthError invalid_redirect_uri.
func ValidRedirectURI(raw string) error {
	bad := oauthErr("invalid_redirect_uri", "each redirect URI must be an absolute https URL, or http on a loopback address, without a fragment")
	if len(raw) > 2000 || strings.ContainsAny(raw, " \t\r\n\x00#") {
		return bad
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Opaque != "" {
		return bad
	}
	// The host goes into the consent page's Content-Security-Policy.
	if strings.IndexFunc(u.Host, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-:[]", r))
	}) >= 0 {
		return bad
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if IsLoopback(u.Hostname()) {
			return nil
		}
	}
	return bad
}

// IsLoopback reports whether host names this machine: localhost or a
// loopback address.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ParseScope reads a space-separated OAuth scope of tiers, lowest first
// and without repeats. Errors: EINVALID for an unknown tier.
func ParseScope(scope string) ([]string, error) {
	var out []string
	for _, s := range strings.Fields(scope) {
		if !slices.Contains(GrantTiers, s) {
			return nil, countersign.Errorf(countersign.EINVALID, "unknown scope %q", s)
		}
	}
	for _, t := range GrantTiers {
		if slices.Contains(strings.Fields(scope), t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// Client returns a registered client. Errors: ENOTFOUND.
func (o *OAuth) Client(ctx context.Context, id string) (*countersign.OAuthClient, error) {
	if id == "" || len(id) > 200 {
		return nil, countersign.Errorf(countersign.ENOTFOUND, "client not found")
	}
	return o.Store.OAuthClient(ctx, id)
}

// AuthenticateClient checks a client at the token or revocation endpoint:
// a public client sends its id only, a confidential one its secret too, by
// the method it registered. Errors: *OAuthError invalid_client, which
// tells a client to register again.
func (o *OAuth) AuthenticateClient(ctx context.Context, id, secret string, basic bool) (*countersign.OAuthClient, error) {
	c, err := o.Client(ctx, id)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return nil, oauthErr("invalid_client", "the client is unknown or was deleted; register again")
	} else if err != nil {
		return nil, err
	}
	if c.AuthMethod == "none" {
		if secret != "" {
			return nil, oauthErr("invalid_client", "this client registered as public and has no secret")
		}
		return c, nil
	}
	if (c.AuthMethod == "client_secret_basic") != basic ||
		subtle.ConstantTimeCompare([]byte(countersign.HashSecret(secret)), []byte(c.SecretHash)) != 1 {
		return nil, oauthErr("invalid_client", "client authentication failed")
	}
	return c, nil
}

// CheckResource reports whether an RFC 8707 resource names this server's
// /mcp (a trailing slash aside).
func (o *OAuth) CheckResource(resource string) bool {
	return o.Resource != "" && strings.TrimSuffix(resource, "/") == strings.TrimSuffix(o.Resource, "/")
}

// AllowInput is what an approver allowed on the consent page.
type AllowInput struct {
	Approver    countersign.ApproverPrincipal
	AccountID   string
	Client      *countersign.OAuthClient
	RedirectURI string
	Challenge   string
	Tiers       []string
	// UserAgent and ClientAddr describe the browser that allowed, which
	// the consent signs in.
	UserAgent, ClientAddr string
	// Proof is the approver's fresh proof of this consent: a password
	// typed again, or a passkey assertion of exactly it.
	Proof *ConsentProof
}

// CheckAllow refuses what Allow would refuse before it looks at the
// proof: no tier, an unknown one, an account the approver is not a member
// of. The consent page checks it before it checks a password, so that a
// mistake in the form costs no sign-in attempt. Errors: EINVALID,
// EFORBIDDEN.
func (o *OAuth) CheckAllow(ctx context.Context, in AllowInput) error {
	if len(in.Tiers) == 0 {
		return countersign.Errorf(countersign.EINVALID, "Choose at least one tier the connection may use.")
	}
	for _, t := range in.Tiers {
		if !slices.Contains(GrantTiers, t) {
			return countersign.Errorf(countersign.EINVALID, "Unknown tier.")
		}
	}
	members, err := o.Store.Members(ctx, in.AccountID)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(members, func(m *countersign.Member) bool { return m.ApproverID == in.Approver.ApproverID })
	if i < 0 {
		return countersign.Errorf(countersign.EFORBIDDEN, "You are not an approver of that account.")
	}
	if !members[i].Role.Administers() {
		return ErrNotAdmin()
	}
	return nil
}

// ErrNotAdmin is the refusal of a change to an account's keys, approvers,
// grants or channels by an approver who is not an admin of it.
func ErrNotAdmin() error { return countersign.ErrNotAdmin() }

// Allow creates a grant of the account for the client, the session that
// signs the consenting browser in for that account, and an authorization
// code. It needs the approver's fresh proof (in.Proof). It returns the
// code and the session's secret id. Errors: EINVALID, EFORBIDDEN when the
// approver is not a member of the account or gave no proof of this
// consent (ErrConsentProof).
func (o *OAuth) Allow(ctx context.Context, in AllowInput) (code, sessionID string, g *countersign.Grant, err error) {
	if err := o.CheckAllow(ctx, in); err != nil {
		return "", "", nil, err
	}
	if err := in.proven(); err != nil {
		return "", "", nil, err
	}
	in.Tiers = normalTiers(in.Tiers)
	now := o.Clock.Now()
	g = &countersign.Grant{
		ID: countersign.NewID("grt_"), AccountID: in.AccountID, ClientID: in.Client.ID, ClientName: in.Client.Name,
		ApproverID: in.Approver.ApproverID, ApproverName: in.Approver.Username, Tiers: in.Tiers, CreatedAt: now,
	}
	// The key's secret is drawn and forgotten: the grant's key can never be
	// used as a bearer key, only through the grant's access tokens.
	key := &countersign.AgentKey{AccountID: in.AccountID, Name: grantKeyName(in.Client.Name, g.ID),
		Hash: countersign.HashSecret(countersign.NewSecret("")), Hint: "(grant)", CreatedAt: now}
	sessionID = countersign.NewSecret("")
	ua := in.UserAgent
	if len(ua) > 200 {
		ua = ua[:200]
	}
	sess := &countersign.Session{Hash: countersign.HashSecret(sessionID), ApproverID: in.Approver.ApproverID, AccountID: in.AccountID,
		CreatedAt: now, ExpiresAt: now.Add(SessionTTL), LastSeenAt: now, UserAgent: ua, Client: in.ClientAddr}
	code = countersign.NewSecret(countersign.OAuthCodePrefix)
	tok := &countersign.OAuthToken{Hash: countersign.HashSecret(code), Kind: countersign.TokenCode, ClientID: in.Client.ID,
		Resource: o.Resource, RedirectURI: in.RedirectURI, Challenge: in.Challenge, CreatedAt: now, ExpiresAt: now.Add(CodeTTL)}
	if err := o.Store.CreateGrant(ctx, g, key, sess, tok); err != nil {
		return "", "", nil, err
	}
	return code, sessionID, g, nil
}

// grantKeyName names a grant's key after its client, so that the inbox and
// the audit say which application asked, within the rules of key names
// (ValidName) and unique by the grant's id: "grant-claude-<id>".
func grantKeyName(client, grantID string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(client) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 24 {
			break
		}
	}
	slug := strings.Trim(b.String(), "-")
	if slug == "" {
		slug = "client"
	}
	return "grant-" + slug + "-" + strings.TrimPrefix(grantID, "grt_")
}

// TokenSet is what the token endpoint hands out.
type TokenSet struct {
	AccessToken  string
	RefreshToken string
	ExpiresIn    int
	Scope        string
}

// issue draws a new access and refresh token for the client.
func (o *OAuth) issue(clientID string, now time.Time) (*TokenSet, []*countersign.OAuthToken) {
	ts := &TokenSet{AccessToken: countersign.NewSecret(countersign.AccessTokenPrefix),
		RefreshToken: countersign.NewSecret(countersign.RefreshTokenPrefix), ExpiresIn: int(AccessTTL.Seconds())}
	return ts, []*countersign.OAuthToken{
		{Hash: countersign.HashSecret(ts.AccessToken), Kind: countersign.TokenAccess, ClientID: clientID, Resource: o.Resource, CreatedAt: now, ExpiresAt: now.Add(AccessTTL)},
		{Hash: countersign.HashSecret(ts.RefreshToken), Kind: countersign.TokenRefresh, ClientID: clientID, Resource: o.Resource, CreatedAt: now, ExpiresAt: now.Add(RefreshTTL)},
	}
}

var errBadGrant = oauthErr("invalid_grant", "the authorization code or refresh token is invalid, expired, already used or was issued to another client")

// ExchangeCode redeems an authorization code once, for the client, the
// redirect URI and the PKCE verifier it was issued for. A code used twice
// by that client, with that redirect URI and verifier, revokes the grant
// it made (RFC 6749 §4.1.2); presented by anyone else, used or not, it is
// invalid_grant and changes nothing, so that a stranger holding a used
// code cannot end someone else's grant. Errors: *OAuthError.
func (o *OAuth) ExchangeCode(ctx context.Context, c *countersign.OAuthClient, code, redirectURI, verifier, resource string) (*TokenSet, error) {
	if resource != "" && !o.CheckResource(resource) {
		return nil, oauthErr("invalid_target", "tokens are issued only for "+o.Resource)
	}
	if !validVerifier(verifier) {
		return nil, oauthErr("invalid_grant", "code_verifier is missing or malformed (RFC 7636: 43 to 128 unreserved characters)")
	}
	now := o.Clock.Now()
	ts, issue := o.issue(c.ID, now)
	check := func(t *countersign.OAuthToken) error {
		if t.ClientID != c.ID || t.RedirectURI != redirectURI || !o.CheckResource(t.Resource) {
			return errBadGrant
		}
		if subtle.ConstantTimeCompare([]byte(S256(verifier)), []byte(t.Challenge)) != 1 {
			return oauthErr("invalid_grant", "code_verifier does not match the code_challenge")
		}
		return nil
	}
	return o.redeem(ctx, code, countersign.TokenCode, now, check, issue, ts)
}

// Refresh rotates a refresh token: the old one is used up, a new pair is
// issued. A refresh token used twice by its client means it leaked: the
// grant is revoked. Another client's is invalid_grant and changes nothing.
// Errors: *OAuthError.
func (o *OAuth) Refresh(ctx context.Context, c *countersign.OAuthClient, refresh, resource string) (*TokenSet, error) {
	if resource != "" && !o.CheckResource(resource) {
		return nil, oauthErr("invalid_target", "tokens are issued only for "+o.Resource)
	}
	now := o.Clock.Now()
	ts, issue := o.issue(c.ID, now)
	check := func(t *countersign.OAuthToken) error {
		if t.ClientID != c.ID {
			return errBadGrant
		}
		return nil
	}
	// The tokens always carry the grant's tiers, what the approver allowed;
	// a scope sent with the refresh changes nothing.
	return o.redeem(ctx, refresh, countersign.TokenRefresh, now, check, issue, ts)
}

func (o *OAuth) redeem(ctx context.Context, secret, kind string, now time.Time, check func(*countersign.OAuthToken) error,
	issue []*countersign.OAuthToken, ts *TokenSet) (*TokenSet, error) {
	if secret == "" || len(secret) > 200 {
		return nil, errBadGrant
	}
	tok, g, err := o.Store.RedeemOAuthToken(ctx, countersign.HashSecret(secret), kind, now, check, issue)
	switch {
	case countersign.ErrorCode(err) == countersign.ECONFLICT && tok != nil:
		// Replay by the client the token was issued to (check accepted
		// it): whoever holds the token now may not be its owner.
		oe := &OAuthError{Code: "invalid_grant", Description: "the token was already used; the grant is revoked, and the client must be allowed again"}
		rerr := o.Store.RevokeGrant(ctx, "", tok.GrantID, now)
		switch {
		case rerr == nil:
			oe.Revoked = tok.GrantID
		case countersign.ErrorCode(rerr) != countersign.ECONFLICT:
			return nil, rerr
		}
		return nil, oe
	case countersign.ErrorCode(err) == countersign.ENOTFOUND:
		return nil, errBadGrant
	case err != nil:
		var oe *OAuthError
		if asOAuthError(err, &oe) {
			return nil, oe
		}
		return nil, err
	}
	ts.Scope = strings.Join(g.Tiers, " ")
	return ts, nil
}

func asOAuthError(err error, target **OAuthError) bool {
	oe, ok := err.(*OAuthError)
	if ok {
		*target = oe
	}
	return ok
}

// RevokeToken revokes a token of the client (RFC 7009); a refresh token
// revokes its grant, whose id it returns ("" when it revoked no grant).
// An unknown token, or one of a grant already revoked, is no error.
func (o *OAuth) RevokeToken(ctx context.Context, c *countersign.OAuthClient, token string) (revoked string, err error) {
	if token == "" || len(token) > 200 {
		return "", nil
	}
	revoked, err = o.Store.DeleteOAuthToken(ctx, countersign.HashSecret(token), c.ID, o.Clock.Now())
	if countersign.ErrorCode(err) == countersign.ECONFLICT || countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return "", nil
	}
	return revoked, err
}

// S256 is the PKCE code challenge of a verifier (RFC 7636).
func S256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// validVerifier: 43 to 128 unreserved characters (RFC 7636 §4.1).
func validVerifier(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	return strings.IndexFunc(v, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' || r == '~')
	}) < 0
}

// ValidChallenge reports whether c can be an S256 code challenge: the
// unpadded base64url of 32 bytes, 43 characters.
func ValidChallenge(c string) bool {
	if len(c) != 43 {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	return err == nil && len(b) == sha256.Size
}

// Grants lists an account's grants.
func (o *OAuth) Grants(ctx context.Context, accountID string) ([]*countersign.Grant, error) {
	return o.Store.Grants(ctx, accountID)
}

// RevokeGrant revokes a grant of the account. Errors: ENOTFOUND,
// ECONFLICT.
func (o *OAuth) RevokeGrant(ctx context.Context, accountID, id string) error {
	if id == "" || len(id) > 100 {
		return countersign.Errorf(countersign.ENOTFOUND, "grant not found")
	}
	return o.Store.RevokeGrant(ctx, accountID, id, o.Clock.Now())
}
