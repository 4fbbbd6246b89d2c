package postgres

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/store/storetest"
)

// copyStore is a store that can be copied from and into.
type copyStore interface {
	countersign.Store
	countersign.Exporter
	countersign.Importer
}

// populate fills s with one of everything a copy must carry, in every
// state that matters: revoked credentials, decided, consumed and expired
// requests, a window, seed links, sessions, server keys, channels with
// items pending, sent and failed, and the audit log of it all.
func populate(t *testing.T, s countersign.Store) {
	t.Helper()
	ctx := t.Context()
	at := func(d time.Duration) time.Time { return storetest.Base.Add(d) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	acc := &countersign.Account{Name: "acme", CreatedAt: at(1)}
	other := &countersign.Account{Name: "other", CreatedAt: at(2)}
	must(s.CreateAccount(ctx, acc))
	must(s.CreateAccount(ctx, other))
	alice := &countersign.Approver{Username: "alice", PasswordHash: "$argon2id$x", CreatedAt: at(3)}
	must(s.CreateApprover(ctx, alice))
	must(s.AddMembership(ctx, alice.ID, acc.ID, countersign.RoleAdmin, at(4)))
	must(s.AddMembership(ctx, alice.ID, other.ID, countersign.RoleApprover, at(5)))
	key := &countersign.AgentKey{AccountID: acc.ID, Name: "laptop", Hash: "hash-1", Hint: "csk_abcd…", CreatedAt: at(6)}
	seedKey := &countersign.AgentKey{AccountID: acc.ID, Name: "seed", Hash: "hash-2", Hint: "csk_efgh…", CreatedAt: at(7), SeedSecret: []byte{0, 1, 2, 255}}
	must(s.CreateAgentKey(ctx, key))
	must(s.CreateAgentKey(ctx, seedKey))
	must(s.RevokeAgentKey(ctx, acc.ID, "seed", at(time.Hour)))
	for i, name := range []string{"cli", "phone"} {
		must(s.CreateApproverToken(ctx, &countersign.ApproverToken{ApproverID: alice.ID, AccountID: acc.ID, Name: name,
			Hash: "tok-" + name, Hint: "cst_…", CreatedAt: at(time.Duration(8 + i))}))
	}
	must(s.RevokeApproverToken(ctx, alice.ID, "phone", at(time.Hour)))
	// A passkey used once, and a passkey-only approver with one that never was.
	bob := &countersign.Approver{Username: "bob", PasswordHash: "", CreatedAt: at(9)}
	must(s.CreateApprover(ctx, bob))
	must(s.AddMembership(ctx, bob.ID, acc.ID, countersign.RoleViewer, at(9)))
	for i, pk := range []*countersign.Passkey{
		{ID: "pk_alice", ApproverID: alice.ID, CredentialID: []byte{1, 2, 3, 0, 255}, PublicKey: []byte("cose-key"), SignCount: 7,
			AAGUID: make([]byte, 16), Transports: []string{"internal", "hybrid"}, Flags: 0x1d, Name: "laptop"},
		{ID: "pk_bob", ApproverID: bob.ID, CredentialID: []byte{9}, PublicKey: []byte("cose-key-2"), AAGUID: []byte{}, Name: "phone"},
	} {
		pk.CreatedAt = at(time.Duration(20 + i))
		must(s.CreatePasskey(ctx, pk))
	}
	must(s.UsePasskey(ctx, "pk_alice", 8, at(30)))

	ch := &countersign.Channel{AccountID: acc.ID, Name: "hook", Type: countersign.ChannelWebhook,
		Config: json.RawMessage(`{"url":"https://example.com/hook"}`), Secret: []byte("sealed"), CreatedAt: at(10)}
	must(s.CreateChannel(ctx, ch))

	mk := func(action string, status countersign.Status, seedID string) *countersign.Request {
		r := &countersign.Request{
			AccountID: acc.ID, KeyID: key.ID, KeyName: key.Name, Reference: countersign.NewReference(),
			Kind: countersign.KindTool, Action: action, Arguments: json.RawMessage(`{"cmd":"` + action + `"}`),
			ArgsHash: "args-" + action, Preview: "run " + action + " — ünïcode", PreviewHash: "prev-" + action,
			RiskReasons: []string{"recursive"}, Context: countersign.RequestContext{User: "ada", SessionID: "sess-1"},
			Status: status, ExpiresAt: at(10 * time.Minute), SeedID: seedID,
			ArgumentsText: "{\n  \"cmd\": \"" + action + "\"\n}",
			Scope: &countersign.Scope{StatedScope: countersign.StatedScope{Commands: []string{"rm"}, Paths: []string{"/src/" + action}, Files: 2, Bytes: 5,
				FilesCapped: true}, Classes: []string{"recursive"}},
		}
		if seedID != "" {
			r.Seed = json.RawMessage(`{"x":[1,2]}`)
			r.Links = []countersign.Link{{Hash: "link-approve-" + action, Action: "approve"}, {Hash: "link-deny-" + action, Action: "deny"}}
			r.Outbox = []countersign.OutboxItem{{ChannelID: ch.ID, Event: countersign.EventCreated, Payload: []byte("sealed payload")}}
		}
		got, _, err := s.CreateRequest(ctx, r, 0, at(20), countersign.AuditEvent{Event: "created", Actor: "key:" + key.ID, Detail: `{"a":1}`})
		must(err)
		return got
	}
	pending := mk("pending", countersign.StatusPending, "delete:del_1")
	approved := mk("approved", countersign.StatusPending, "")
	consumed := mk("consumed", countersign.StatusPending, "")
	mk("expiring", countersign.StatusPending, "")
	_, err := s.Transition(ctx, countersign.Transition{ID: approved.ID, From: []countersign.Status{countersign.StatusPending},
		To: countersign.StatusApproved, Now: at(30), DecidedBy: "alice", Reason: "ok",
		Window: &countersign.AutoApproveWindow{SessionID: "sess-1", Kind: countersign.KindTool, Action: "approved", Until: at(time.Hour),
			Scope: &countersign.Scope{StatedScope: countersign.StatedScope{Commands: []string{"rm"}, Paths: []string{"/src/approved"}}, Classes: []string{"recursive"}}}},
		countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"})
	must(err)
	must(s.ClaimCoverage(ctx, countersign.Coverage{ApprovalID: approved.ID, RequestID: "req_covered", CreatedAt: at(35)}))
	for _, to := range []countersign.Status{countersign.StatusApproved, countersign.StatusConsumed} {
		from := countersign.StatusPending
		if to == countersign.StatusConsumed {
			from = countersign.StatusApproved
		}
		_, err := s.Transition(ctx, countersign.Transition{ID: consumed.ID, From: []countersign.Status{from}, To: to, Now: at(40), DecidedBy: "alice"},
			countersign.AuditEvent{Event: string(to), Actor: "approver:alice", Detail: "{}"})
		must(err)
	}
	_, err = s.ExpireRequests(ctx, "", at(10*time.Minute))
	must(err)
	_ = pending

	must(s.CreateSession(ctx, &countersign.Session{Hash: "sess-hash", ApproverID: alice.ID, AccountID: acc.ID,
		CreatedAt: at(50), ExpiresAt: at(12 * time.Hour), LastSeenAt: at(60), UserAgent: "browser", Client: "192.0.2.1"}))
	_, err = s.ServerKey(ctx, "csrf", 32)
	must(err)

	// An OAuth client, a grant with its consent's session and code, the
	// code redeemed for tokens, and a revoked grant.
	must(s.CreateOAuthClient(ctx, &countersign.OAuthClient{ID: "csc_1", Name: "Claude", RedirectURIs: []string{"https://claude.ai/api/mcp/auth_callback"},
		AuthMethod: "none", RegisteredFrom: "192.0.2.1", CreatedAt: at(90)}, countersign.ClientLimits{}))
	for i, name := range []string{"live", "gone"} {
		g := &countersign.Grant{AccountID: acc.ID, ClientID: "csc_1", ClientName: "Claude", ApproverID: alice.ID, ApproverName: "alice",
			Tiers: []string{"read", "write"}, CreatedAt: at(time.Duration(91 + i))}
		must(s.CreateGrant(ctx, g, &countersign.AgentKey{AccountID: acc.ID, Name: "grant-" + name, Hash: "grant-hash-" + name, Hint: "(grant)", CreatedAt: at(91)},
			&countersign.Session{Hash: "grant-sess-" + name, ApproverID: alice.ID, AccountID: acc.ID, CreatedAt: at(91), ExpiresAt: at(12 * time.Hour), LastSeenAt: at(91), UserAgent: "b", Client: "192.0.2.1"},
			&countersign.OAuthToken{Hash: "code-" + name, Kind: countersign.TokenCode, ClientID: "csc_1", Resource: "http://x/mcp",
				RedirectURI: "https://claude.ai/api/mcp/auth_callback", Challenge: "ch", CreatedAt: at(91), ExpiresAt: at(time.Hour)}))
		_, _, err := s.RedeemOAuthToken(ctx, "code-"+name, countersign.TokenCode, at(92), nil, []*countersign.OAuthToken{
			{Hash: "access-" + name, Kind: countersign.TokenAccess, ClientID: "csc_1", Resource: "http://x/mcp", CreatedAt: at(92), ExpiresAt: at(time.Hour)},
			{Hash: "refresh-" + name, Kind: countersign.TokenRefresh, ClientID: "csc_1", Resource: "http://x/mcp", CreatedAt: at(92), ExpiresAt: at(time.Hour)},
		})
		must(err)
		if name == "gone" {
			must(s.RevokeGrant(ctx, acc.ID, g.ID, at(93)))
		}
	}

	// Outbox items in three states: sent, failed, and pending after a
	// failed attempt.
	must(s.Enqueue(ctx, []countersign.OutboxItem{
		{AccountID: acc.ID, ChannelID: ch.ID, RequestID: consumed.ID, Event: countersign.EventDecided, Payload: []byte("p1")},
		{AccountID: acc.ID, ChannelID: ch.ID, RequestID: approved.ID, Event: countersign.EventDecided, Payload: []byte("p2")},
	}, at(70)))
	claimed, err := s.ClaimDue(ctx, at(80), 10, time.Minute)
	must(err)
	if len(claimed) != 3 {
		t.Fatalf("claimed %d outbox items, want 3", len(claimed))
	}
	must(s.MarkSent(ctx, claimed[0].ID, claimed[0].Claim, at(81)))
	must(s.MarkFailed(ctx, claimed[1].ID, claimed[1].Claim, at(82), time.Time{}, "gave up"))
	must(s.MarkFailed(ctx, claimed[2].ID, claimed[2].Claim, at(83), at(time.Hour), "will retry"))
}

// export reads every record of s.
func export(t *testing.T, s countersign.Exporter) []countersign.Record {
	t.Helper()
	var out []countersign.Record
	if err := s.Export(t.Context(), func(r countersign.Record) error {
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatalf("Export: %v", err)
	}
	return out
}

// copyInto copies everything of from into to.
func copyInto(t *testing.T, from countersign.Exporter, to countersign.Importer) error {
	t.Helper()
	return to.Import(t.Context(), func(put func(countersign.Record) error) error {
		return from.Export(t.Context(), put)
	})
}

func openSQLite(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "countersign.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestCopyBetweenBackends moves a populated store from SQLite to
// PostgreSQL and back: every record arrives as it was, the audit log
// verifies on each copy, and a copy into a store that is not empty is
// refused and changes nothing.
func TestCopyBetweenBackends(t *testing.T) {
	src := openSQLite(t)
	populate(t, src)
	want := export(t, src)
	if len(want) < 30 {
		t.Fatalf("the populated store exports only %d records", len(want))
	}

	pg := openTest(t, Migrated.SchemaURL(t))
	back := openSQLite(t)
	for _, step := range []struct {
		name     string
		from, to copyStore
	}{{"sqlite to postgres", src, pg}, {"postgres to sqlite", pg, back}} {
		if err := copyInto(t, step.from, step.to); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := export(t, step.to); !reflect.DeepEqual(got, want) {
			for i := range min(len(got), len(want)) {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Errorf("%s: record %d differs:\n got %s\nwant %s", step.name, i, show(got[i]), show(want[i]))
					break
				}
			}
			t.Fatalf("%s: %d records arrived, %d were sent", step.name, len(got), len(want))
		}
		// The roles as the copy's sessions and tokens read them, not only
		// as its export writes them.
		if got, want := roles(t, step.to), roles(t, src); !reflect.DeepEqual(got, want) || len(want) != 3 {
			t.Errorf("%s: the copy's memberships are %v, want %v", step.name, got, want)
		}
		if problems, n := storetest.Verify(t, step.to); len(problems) != 0 || n == 0 {
			t.Errorf("%s: the copy's audit log: %d entries, problems %v", step.name, n, problems)
		}
	}

	// Into a store that is not empty: refused, nothing written.
	for name, dst := range map[string]copyStore{"postgres": pg, "sqlite": back} {
		seq, _, _ := dst.AuditHead(t.Context())
		err := copyInto(t, src, dst)
		if countersign.ErrorCode(err) != countersign.ECONFLICT {
			t.Errorf("copy into a full %s store: %v, want ECONFLICT", name, err)
		}
		if seq2, _, _ := dst.AuditHead(t.Context()); seq2 != seq {
			t.Errorf("the refused copy into %s moved the audit head from %d to %d", name, seq, seq2)
		}
	}
}

// roles lists the memberships of every account of s as
// account/username:role.
func roles(t *testing.T, s copyStore) []string {
	t.Helper()
	var out []string
	for _, name := range []string{"acme", "other"} {
		acc, err := s.AccountByName(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		members, err := s.Members(t.Context(), acc.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range members {
			out = append(out, name+"/"+m.Username+":"+string(m.Role))
		}
	}
	return out
}

// TestImportAllOrNothing: an import that fails half-way leaves the target
// as empty as it was, so that it can be retried.
func TestImportAllOrNothing(t *testing.T) {
	src := openSQLite(t)
	populate(t, src)
	pg := openTest(t, Migrated.SchemaURL(t))
	n := 0
	err := pg.Import(t.Context(), func(put func(countersign.Record) error) error {
		return src.Export(t.Context(), func(r countersign.Record) error {
			if n++; n == 20 {
				return countersign.Errorf(countersign.EINTERNAL, "the source went away")
			}
			return put(r)
		})
	})
	if err == nil {
		t.Fatal("a failed import reported success")
	}
	if got := export(t, pg); len(got) != 1 || got[0].AuditHead == nil || got[0].AuditHead.Seq != 0 {
		t.Fatalf("after a failed import the store holds %d records", len(got))
	}
	if err := copyInto(t, src, pg); err != nil {
		t.Fatalf("the import again: %v", err)
	}
}

func show(r countersign.Record) string {
	b, _ := json.Marshal(r)
	return string(b)
}
