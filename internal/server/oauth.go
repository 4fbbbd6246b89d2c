package server

// The authorization side of MCP (revisions 2025-11-25 and 2026-07-28,
// "Authorization"): discovery (RFC 9728, RFC 8414), dynamic client
// registration (RFC 7591), the token endpoint and revocation (RFC 7009).
// The consent page is in oauth_consent.go.
//
// The endpoints are written here, small, rather than with an OAuth
// library: fosite and zitadel's op each bring their own storage interfaces,
// session types and page flow (and, for op, OpenID Connect), which would
// have to be bent around the grants store, the inbox's sessions and its
// CSRF and Origin rules. What remains is a handful of form decoders; every
// rule lives in internal/identity.

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/ratelimit"
)

// oauthMaxBody bounds the body of a registration or token request.
const oauthMaxBody = 16 << 10

// issuer is the authorization server's identifier: the public URL.
func (s *Server) issuer() string { return strings.TrimRight(s.cfg.PublicURL.String(), "/") }

// resourceMetadataURL is where /mcp's protected resource metadata is
// (RFC 9728 §3.1: the well-known path inserted before the resource's path).
func (s *Server) resourceMetadataURL() string {
	return s.issuer() + "/.well-known/oauth-protected-resource/mcp"
}

func (s *Server) protectedResource(w http.ResponseWriter, r *http.Request) {
	writeOAuthJSON(w, http.StatusOK, map[string]any{
		"resource":                 s.oauth.Resource,
		"authorization_servers":    []string{s.issuer()},
		"bearer_methods_supported": []string{"header"},
		"scopes_supported":         identity.GrantTiers,
		"resource_name":            "countersign",
	})
}

func (s *Server) authorizationServer(w http.ResponseWriter, r *http.Request) {
	iss := s.issuer()
	auth := []string{"none", "client_secret_basic", "client_secret_post"}
	writeOAuthJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         iss,
		"authorization_endpoint":                         iss + "/oauth/authorize",
		"token_endpoint":                                 iss + "/oauth/token",
		"registration_endpoint":                          iss + "/oauth/register",
		"revocation_endpoint":                            iss + "/oauth/revoke",
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          auth,
		"revocation_endpoint_auth_methods_supported":     auth,
		"scopes_supported":                               identity.GrantTiers,
		"authorization_response_iss_parameter_supported": true,
		// An https client_id the server would fetch is a request to any
		// address a stranger names; clients that offer them (claude.ai
		// among them) also register dynamically.
		"client_id_metadata_document_supported": false,
	})
}

// oauthAPI wraps an OAuth endpoint: its own rate limit per client address,
// a bounded body, and errors in the RFC 6749 shape.
func (s *Server) oauthAPI(lim *ratelimit.Keyed, h func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ok, retry := lim.Allow(s.clientAddr(r), time.Now()); !ok {
			w.Header().Set("Retry-After", retryAfter(retry))
			writeOAuthError(w, http.StatusTooManyRequests, "slow_down", "too many requests from this address; retry after the time in Retry-After")
			return
		}
		if r.ContentLength > oauthMaxBody {
			writeOAuthError(w, http.StatusRequestEntityTooLarge, "invalid_request", "the request body is too large")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, oauthMaxBody)
		if err := h(w, r); err != nil {
			s.writeOAuthErr(w, r, err)
		}
	}
}

// writeOAuthErr answers an error as RFC 6749 §5.2 has it. Internal errors
// are logged with an id and answered with that id only.
func (s *Server) writeOAuthErr(w http.ResponseWriter, r *http.Request, err error) {
	var oe *identity.OAuthError
	if errors.As(err, &oe) {
		status := http.StatusBadRequest
		if oe.Code == "invalid_client" {
			status = http.StatusUnauthorized
			if strings.HasPrefix(r.Header.Get("Authorization"), "Basic ") {
				w.Header().Set("WWW-Authenticate", `Basic realm="countersign"`)
			}
		}
		writeOAuthError(w, status, oe.Code, oe.Description)
		return
	}
	switch countersign.ErrorCode(err) {
	case countersign.ELIMIT:
		writeOAuthError(w, http.StatusTooManyRequests, "slow_down", countersign.ErrorMessage(err))
	case countersign.EINVALID:
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", countersign.ErrorMessage(err))
	default:
		id := countersign.NewID("")[:10]
		s.log.Error("internal error", "error_id", id, "route", r.Pattern, "err", err)
		writeOAuthError(w, http.StatusInternalServerError, "server_error", "internal error; the server log has the details under id "+id)
	}
}

func writeOAuthError(w http.ResponseWriter, status int, code, desc string) {
	writeOAuthJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

// writeOAuthJSON answers JSON that no cache may keep (RFC 6749 §5.1).
func writeOAuthJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// register is dynamic client registration (RFC 7591).
func (s *Server) register(w http.ResponseWriter, r *http.Request) error {
	var m identity.ClientMetadata
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(&m); err != nil {
		return &identity.OAuthError{Code: "invalid_client_metadata", Description: "the body must be one JSON object of client metadata"}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &identity.OAuthError{Code: "invalid_client_metadata", Description: "the body must be one JSON object of client metadata"}
	}
	c, secret, err := s.oauth.Register(r.Context(), &m, s.clientAddr(r))
	if err != nil {
		return err
	}
	s.log.Info("oauth client registered", "client_id", c.ID, "auth_method", c.AuthMethod, "client", s.clientAddr(r))
	out := map[string]any{
		"client_id":                  c.ID,
		"client_id_issued_at":        c.CreatedAt.Unix(),
		"client_name":                c.Name,
		"redirect_uris":              c.RedirectURIs,
		"token_endpoint_auth_method": c.AuthMethod,
		"grant_types":                m.GrantTypes,
		"response_types":             m.ResponseTypes,
	}
	if m.Scope != "" {
		out["scope"] = m.Scope
	}
	if secret != "" {
		out["client_secret"] = secret
		out["client_secret_expires_at"] = 0
	}
	writeOAuthJSON(w, http.StatusCreated, out)
	return nil
}

// tokenClient authenticates the client of a token or revocation request:
// HTTP Basic, or client_id (and client_secret) in the form.
func (s *Server) tokenClient(r *http.Request) (*countersign.OAuthClient, error) {
	if id, secret, ok := r.BasicAuth(); ok {
		// RFC 6749 §2.3.1: the id and secret are form-encoded inside Basic.
		id, secret = formDecode(id), formDecode(secret)
		if form := r.PostFormValue("client_id"); form != "" && form != id {
			return nil, &identity.OAuthError{Code: "invalid_request", Description: "client_id differs from the one in Authorization"}
		}
		return s.oauth.AuthenticateClient(r.Context(), id, secret, true)
	}
	id := r.PostFormValue("client_id")
	if id == "" {
		return nil, &identity.OAuthError{Code: "invalid_client", Description: "client_id is missing"}
	}
	return s.oauth.AuthenticateClient(r.Context(), id, r.PostFormValue("client_secret"), false)
}

// parseOAuthForm reads an application/x-www-form-urlencoded body and
// refuses a parameter sent twice (RFC 6749 §3.2).
func parseOAuthForm(r *http.Request) error {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return &identity.OAuthError{Code: "invalid_request", Description: "send the parameters as application/x-www-form-urlencoded"}
	}
	if err := r.ParseForm(); err != nil {
		return &identity.OAuthError{Code: "invalid_request", Description: "the form cannot be read"}
	}
	for k, v := range r.PostForm {
		if len(v) > 1 {
			return &identity.OAuthError{Code: "invalid_request", Description: "the parameter " + k + " is sent more than once"}
		}
	}
	return nil
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) error {
	if err := parseOAuthForm(r); err != nil {
		return err
	}
	c, err := s.tokenClient(r)
	if err != nil {
		return err
	}
	var ts *identity.TokenSet
	switch r.PostFormValue("grant_type") {
	case "authorization_code":
		ts, err = s.oauth.ExchangeCode(r.Context(), c, r.PostFormValue("code"), r.PostFormValue("redirect_uri"),
			r.PostFormValue("code_verifier"), r.PostFormValue("resource"))
	case "refresh_token":
		ts, err = s.oauth.Refresh(r.Context(), c, r.PostFormValue("refresh_token"), r.PostFormValue("resource"))
	case "":
		return &identity.OAuthError{Code: "invalid_request", Description: "grant_type is missing"}
	default:
		return &identity.OAuthError{Code: "unsupported_grant_type", Description: "grant_type must be authorization_code or refresh_token"}
	}
	if err != nil {
		var oe *identity.OAuthError
		if errors.As(err, &oe) {
			s.log.Info("oauth token refused", "client_id", c.ID, "error", oe.Code, "client", s.clientAddr(r))
			if oe.Revoked != "" {
				s.log.Warn("oauth grant revoked", "grant", oe.Revoked, "reason", "replay", "grant_type", r.PostFormValue("grant_type"),
					"client_id", c.ID, "client", s.clientAddr(r))
			}
		}
		return err
	}
	writeOAuthJSON(w, http.StatusOK, map[string]any{
		"access_token": ts.AccessToken, "token_type": "Bearer", "expires_in": ts.ExpiresIn,
		"refresh_token": ts.RefreshToken, "scope": ts.Scope,
	})
	return nil
}

// revoke is token revocation (RFC 7009): 200 whether or not the token was
// known.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) error {
	if err := parseOAuthForm(r); err != nil {
		return err
	}
	c, err := s.tokenClient(r)
	if err != nil {
		return err
	}
	if r.PostFormValue("token") == "" {
		return &identity.OAuthError{Code: "invalid_request", Description: "token is missing"}
	}
	revoked, err := s.oauth.RevokeToken(r.Context(), c, r.PostFormValue("token"))
	if err != nil {
		return err
	}
	if revoked != "" {
		s.log.Info("oauth grant revoked", "grant", revoked, "reason", "revocation", "client_id", c.ID, "client", s.clientAddr(r))
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	return nil
}

// mcpAgentOf authenticates a request to /mcp: an agent key, or an OAuth
// access token issued for this server's /mcp. A refused request is told
// where the protected resource metadata is, which starts a client's OAuth
// flow (RFC 9728 §5.1).
func (s *Server) mcpAgentOf(w http.ResponseWriter, r *http.Request) (countersign.Agent, error) {
	secret, err := bearer(r)
	var a countersign.Agent
	if err == nil {
		a, err = approval.OffStack(func() (countersign.Agent, error) {
			if strings.HasPrefix(secret, countersign.AccessTokenPrefix) {
				return s.auth.AccessAgent(r.Context(), secret, s.oauth.Resource, time.Now())
			}
			return s.auth.Agent(r.Context(), secret)
		})
	}
	if countersign.ErrorCode(err) == countersign.EUNAUTHORIZED {
		v := `Bearer resource_metadata="` + s.resourceMetadataURL() + `"`
		if secret != "" {
			v = `Bearer error="invalid_token", resource_metadata="` + s.resourceMetadataURL() + `"`
		}
		w.Header().Set("WWW-Authenticate", v)
	}
	return a, err
}

// formDecode undoes the form encoding of a Basic credential; a value that
// is not form-encoded stays as it is.
func formDecode(v string) string {
	if d, err := url.QueryUnescape(v); err == nil {
		return d
	}
	return v
}
