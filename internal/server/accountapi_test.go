package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
)

// TestAccountAPI: an admin's token manages the account's agent keys,
// approvers' roles and grants through the API; an approver's or a
// viewer's token, and any change to another account's key, are refused
// and change nothing; the account keeps its last admin.
func TestAccountAPI(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	e.World.Approver("apu", "acme")
	e.World.Approver("vic", "acme")
	e.World.Approver("newbie") // created by the operator, of no account yet
	for u, role := range map[string]countersign.Role{"alice": countersign.RoleAdmin, "carol": countersign.RoleApprover, "apu": countersign.RoleApprover, "vic": countersign.RoleViewer} {
		if err := e.Admin.SetRole(e.Ctx, "acme", u, role); err != nil {
			t.Fatal(err)
		}
	}
	admin, apu, vic := e.World.Token("alice", "acme"), e.World.Token("apu", "acme"), e.World.Token("vic", "acme")
	call := e.apiCall
	want := func(what string, status int, body string, wantStatus int, wantBody string) {
		t.Helper()
		if status != wantStatus || !strings.Contains(body, wantBody) {
			t.Errorf("%s: %d %s; want %d with %q", what, status, body, wantStatus, wantBody)
		}
	}

	// Not an admin: refused, whatever the route.
	for _, tok := range []string{apu, vic} {
		for _, c := range [][3]string{
			{"GET", "/api/v1/account/keys", ""}, {"POST", "/api/v1/account/keys", `{"name":"sneaky"}`},
			{"DELETE", "/api/v1/account/keys/a", ""}, {"GET", "/api/v1/account/approvers", ""},
			{"PUT", "/api/v1/account/approvers/vic", `{"role":"admin"}`}, {"DELETE", "/api/v1/account/approvers/alice", ""},
			{"GET", "/api/v1/account/grants", ""}, {"DELETE", "/api/v1/account/grants/grt_x", ""},
		} {
			st, body := call(tok, c[0], c[1], c[2])
			want("not an admin: "+c[0]+" "+c[1], st, body, http.StatusForbidden, "Only an admin")
		}
	}
	if keys, _ := e.Store.AgentKeys(e.Ctx, e.Acme.ID); len(keys) != 2 {
		t.Fatalf("refused calls changed the keys: %d keys", len(keys))
	}

	// Keys: create, use, list, revoke.
	st, body := call(admin, "POST", "/api/v1/account/keys", `{"name":"ci"}`)
	want("create a key", st, body, http.StatusCreated, `"name":"ci"`)
	var created struct{ Secret string }
	json.Unmarshal([]byte(body), &created)
	if !strings.HasPrefix(created.Secret, countersign.AgentKeyPrefix) {
		t.Fatalf("the new key's secret is %q", created.Secret)
	}
	if _, _, err := client.New(e.URL, created.Secret).Create(e.Ctx, ibTool("s")); err != nil {
		t.Errorf("the new key asks nothing: %v", err)
	}
	st, body = call(admin, "POST", "/api/v1/account/keys", `{"name":"Bad Name"}`)
	want("a bad key name", st, body, http.StatusBadRequest, "key name must be")
	st, body = call(admin, "GET", "/api/v1/account/keys", "")
	want("list keys", st, body, http.StatusOK, `"name":"ci"`)
	if strings.Contains(body, created.Secret) || strings.Contains(body, `"secret"`) {
		t.Errorf("the key list shows a secret: %s", body)
	}
	st, body = call(admin, "DELETE", "/api/v1/account/keys/x1", "")
	want("revoke another account's key", st, body, http.StatusNotFound, "")
	st, body = call(admin, "DELETE", "/api/v1/account/keys/ci", "")
	want("revoke the key", st, body, http.StatusOK, `"revoked":true`)
	if _, _, err := client.New(e.URL, created.Secret).Create(e.Ctx, ibTool("s")); err == nil {
		t.Error("a revoked key still asks")
	}

	// Approvers: list, add one the operator made, change roles, remove.
	st, body = call(admin, "GET", "/api/v1/account/approvers", "")
	want("list approvers", st, body, http.StatusOK, `{"username":"vic","role":"viewer"`)
	st, body = call(admin, "PUT", "/api/v1/account/approvers/newbie", `{"role":"viewer"}`)
	want("add an approver", st, body, http.StatusCreated, `"role":"viewer"`)
	st, body = call(admin, "PUT", "/api/v1/account/approvers/vic", `{"role":"approver"}`)
	want("make a viewer an approver", st, body, http.StatusOK, `"role":"approver"`)
	if _, err := client.New(e.URL, vic).Decide(e.Ctx, e.create(e.agentA, ibTool("s")).ID, client.Decision{Decision: "deny"}); err != nil {
		t.Errorf("the viewer made approver cannot decide with the same token: %v", err)
	}
	for name, c := range map[string][3]string{
		"an unknown role":        {"/api/v1/account/approvers/vic", `{"role":"owner"}`, "400"},
		"an unknown approver":    {"/api/v1/account/approvers/nobody", `{"role":"viewer"}`, "404"},
		"the last admin demoted": {"/api/v1/account/approvers/alice", `{"role":"approver"}`, "409"},
	} {
		st, body := call(admin, "PUT", c[0], c[1])
		want(name, st, body, map[string]int{"400": 400, "404": 404, "409": 409}[c[2]], "")
	}
	st, body = call(admin, "DELETE", "/api/v1/account/approvers/alice", "")
	want("the last admin removed", st, body, http.StatusConflict, "last admin")
	st, body = call(admin, "DELETE", "/api/v1/account/approvers/apu", "")
	want("remove an approver", st, body, http.StatusOK, `"removed":true`)
	if _, err := client.New(e.URL, apu).List(e.Ctx, "pending", 1); err == nil {
		t.Error("a removed approver's token still lists")
	}
	members, _ := e.Store.Members(e.Ctx, e.Acme.ID)
	var got []string
	for _, m := range members {
		got = append(got, m.Username+":"+string(m.Role))
	}
	if strings.Join(got, " ") != "alice:admin carol:approver newbie:viewer vic:approver" {
		t.Errorf("the account's approvers are %v", got)
	}

	// Grants: an unknown one is not found; the list is the account's.
	st, body = call(admin, "GET", "/api/v1/account/grants", "")
	want("list grants", st, body, http.StatusOK, `"grants":[]`)
	st, body = call(admin, "DELETE", "/api/v1/account/grants/grt_missing", "")
	want("revoke an unknown grant", st, body, http.StatusNotFound, "")
}

// apiCall calls the API with an approver's token and returns the status
// and the body.
func (e *ibEnv) apiCall(token, method, path, body string) (int, string) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.Ctx, method, e.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = e.Public.Host
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAccountAPIChangesTakeEffectAtOnce: an admin demoted through the API
// loses the admin's power with the very token it used a moment before
// (which the store may have cached), and a member removed from one
// account loses its tokens there, not in its other account.
func TestAccountAPIChangesTakeEffectAtOnce(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	alice, carol, carolOther := e.World.Token("alice", "acme"), e.World.Token("carol", "acme"), e.World.Token("carol", "other")
	want := func(what string, status int, body string, wantStatus int, wantBody string) {
		t.Helper()
		if status != wantStatus || !strings.Contains(body, wantBody) {
			t.Errorf("%s: %d %s; want %d with %q", what, status, body, wantStatus, wantBody)
		}
	}
	st, body := e.apiCall(carol, "GET", "/api/v1/account/keys", "")
	want("carol, an admin, lists the keys", st, body, http.StatusOK, `"keys"`)
	st, body = e.apiCall(alice, "PUT", "/api/v1/account/approvers/carol", `{"role":"viewer"}`)
	want("alice makes carol a viewer", st, body, http.StatusOK, `"role":"viewer"`)
	st, body = e.apiCall(carol, "GET", "/api/v1/account/keys", "")
	want("carol, demoted, lists the keys with the same token", st, body, http.StatusForbidden, "Only an admin")
	st, body = e.apiCall(carol, "PUT", "/api/v1/account/approvers/carol", `{"role":"admin"}`)
	want("carol, demoted, makes herself an admin again", st, body, http.StatusForbidden, "Only an admin")
	r := e.create(e.agentA, ibTool("s1"))
	st, body = e.apiCall(carol, "POST", "/api/v1/requests/"+r.ID+"/decision", `{"decision":"approve"}`)
	want("carol, a viewer, approves", st, body, http.StatusForbidden, "viewer")
	e.wantStatus("after the viewer's approval", r.ID, countersign.StatusPending)

	st, body = e.apiCall(alice, "DELETE", "/api/v1/account/approvers/carol", "")
	want("alice removes carol from acme", st, body, http.StatusOK, `"removed":true`)
	st, body = e.apiCall(carol, "GET", "/api/v1/requests?status=pending", "")
	want("carol's acme token after her removal", st, body, http.StatusUnauthorized, "")
	st, body = e.apiCall(carolOther, "GET", "/api/v1/account/keys", "")
	want("carol's token of other, an account she still administers", st, body, http.StatusOK, `"name":"x"`)
	st, body = e.apiCall(alice, "DELETE", "/api/v1/account/approvers/carol", "")
	want("alice removes carol again", st, body, http.StatusNotFound, "not a member")
}
