package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/countersign/countersign"
)

var (
	_ countersign.Exporter = (*DB)(nil)
	_ countersign.Importer = (*DB)(nil)
)

// SchemaVersion returns the schema version of the database: the newest
// migration applied to it.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, db.read)
}

// exportQueries are the tables in the order Export hands them over and
// Import needs them, each with the query that reads it whole and the scan
// that makes a record of a row.
var exportQueries = []struct {
	table string
	query string
	scan  func(scanner) (countersign.Record, error)
}{
	{"accounts", `SELECT id, name, created_at FROM accounts ORDER BY created_at, id`,
		func(s scanner) (countersign.Record, error) {
			a, err := scanAccount(s)
			return countersign.Record{Account: a}, err
		}},
	{"approvers", `SELECT id, username, password_hash, created_at FROM approvers ORDER BY created_at, id`,
		func(s scanner) (countersign.Record, error) {
			var a countersign.Approver
			var created int64
			err := s.Scan(&a.ID, &a.Username, &a.PasswordHash, &created)
			a.CreatedAt = fromNanos(created)
			return countersign.Record{Approver: &a}, err
		}},
	{"memberships", `SELECT approver_id, account_id, created_at, role FROM memberships ORDER BY created_at, approver_id, account_id`,
		func(s scanner) (countersign.Record, error) {
			var m countersign.Membership
			var created int64
			err := s.Scan(&m.ApproverID, &m.AccountID, &created, &m.Role)
			m.CreatedAt = fromNanos(created)
			return countersign.Record{Membership: &m}, err
		}},
	{"agent keys", `SELECT ` + agentKeyColumns + ` FROM agent_keys ORDER BY created_at, id`,
		func(s scanner) (countersign.Record, error) {
			k, err := scanAgentKey(s)
			return countersign.Record{AgentKey: k}, err
		}},
	{"approver tokens", `SELECT id, approver_id, account_id, name, hash, hint, created_at, revoked_at
		FROM approver_tokens ORDER BY created_at, id`,
		func(s scanner) (countersign.Record, error) {
			var t countersign.ApproverToken
			var created, revoked int64
			err := s.Scan(&t.ID, &t.ApproverID, &t.AccountID, &t.Name, &t.Hash, &t.Hint, &created, &revoked)
			t.CreatedAt, t.RevokedAt = fromNanos(created), fromNanos(revoked)
			return countersign.Record{ApproverToken: &t}, err
		}},
	{"passkeys", `SELECT ` + passkeyColumns + ` FROM webauthn_credentials ORDER BY created_at, id`,
		func(s scanner) (countersign.Record, error) {
			p, err := scanPasskey(s)
			return countersign.Record{Passkey: p}, err
		}},
	{"oauth clients", `SELECT ` + oauthClientColumns + ` FROM oauth_clients ORDER BY created_at, id`,
		func(s scanner) (countersign.Record, error) {
			c, err := scanOAuthClient(s)
			return countersign.Record{OAuthClient: c}, err
		}},
	{"grants", `SELECT ` + grantColumns + ` FROM grants ORDER BY created_at, id`,
		func(s scanner) (countersign.Record, error) {
			g, err := scanGrantRow(s)
			return countersign.Record{Grant: g}, err
		}},
	{"oauth tokens", `SELECT ` + oauthTokenColumns + ` FROM oauth_tokens ORDER BY created_at, hash`,
		func(s scanner) (countersign.Record, error) {
			t, err := scanOAuthToken(s)
			return countersign.Record{OAuthToken: t}, err
		}},
	{"requests", `SELECT ` + requestColumns + ` FROM requests ORDER BY created_at, id`,
		func(s scanner) (countersign.Record, error) {
			r, err := scanRequest(s)
			return countersign.Record{Request: r}, err
		}},
	{"links", `SELECT hash, request_id, action, created_at FROM links ORDER BY created_at, hash`,
		func(s scanner) (countersign.Record, error) {
			var l countersign.Link
			var created int64
			err := s.Scan(&l.Hash, &l.RequestID, &l.Action, &created)
			l.CreatedAt = fromNanos(created)
			return countersign.Record{Link: &l}, err
		}},
	{"auto-approve windows", `SELECT ` + windowColumns + ` FROM auto_approve_windows ORDER BY created_at, id`,
		func(s scanner) (countersign.Record, error) {
			w, err := scanWindow(s)
			return countersign.Record{Window: w}, err
		}},
	{"coverages", `SELECT approval_id, request_id, created_at FROM coverages ORDER BY created_at, approval_id`,
		func(s scanner) (countersign.Record, error) {
			var c countersign.Coverage
			var created int64
			err := s.Scan(&c.ApprovalID, &c.RequestID, &created)
			c.CreatedAt = fromNanos(created)
			return countersign.Record{Coverage: &c}, err
		}},
	{"sessions", `SELECT ` + sessionColumns + ` FROM sessions s ORDER BY s.created_at, s.hash`,
		func(s scanner) (countersign.Record, error) {
			sess, err := scanSession(s)
			return countersign.Record{Session: sess}, err
		}},
	{"notification channels", `SELECT ` + channelColumns + ` FROM notify_channels ORDER BY created_at, id`,
		func(s scanner) (countersign.Record, error) {
			c, err := scanChannel(s)
			return countersign.Record{Channel: c}, err
		}},
	{"outbox items", `SELECT ` + outboxColumns + ` FROM outbox ORDER BY created_at, id`,
		func(s scanner) (countersign.Record, error) {
			it, err := scanOutbox(s)
			return countersign.Record{OutboxItem: it}, err
		}},
	{"server keys", `SELECT name, key, created_at FROM server_keys ORDER BY name`,
		func(s scanner) (countersign.Record, error) {
			var k countersign.ServerKey
			var created int64
			err := s.Scan(&k.Name, &k.Key, &created)
			k.CreatedAt = fromNanos(created)
			return countersign.Record{ServerKey: &k}, err
		}},
	{"secret key check", `SELECT audit_keyed_from, mac FROM secret_key WHERE id = 1`,
		func(s scanner) (countersign.Record, error) {
			var c countersign.KeyCheck
			err := s.Scan(&c.AuditKeyedFrom, &c.MAC)
			return countersign.Record{KeyCheck: &c}, err
		}},
	{"audit entries", `SELECT seq, at, account_id, request_id, event, actor, detail, prev_hash, hash FROM audit_log ORDER BY seq`,
		func(s scanner) (countersign.Record, error) {
			var e countersign.AuditEntry
			var at int64
			err := s.Scan(&e.Seq, &at, &e.AccountID, &e.RequestID, &e.Event, &e.Actor, &e.Detail, &e.PrevHash, &e.Hash)
			e.At = fromNanos(at)
			return countersign.Record{AuditEntry: &e}, err
		}},
	{"audit head", `SELECT seq, hash FROM audit_head WHERE id = 1`,
		func(s scanner) (countersign.Record, error) {
			var h countersign.AuditHead
			err := s.Scan(&h.Seq, &h.Hash)
			return countersign.Record{AuditHead: &h}, err
		}},
}

// Export implements countersign.Exporter. It reads in one read
// transaction, which in WAL mode sees one snapshot even while the server
// keeps writing.
func (db *DB) Export(ctx context.Context, put func(countersign.Record) error) error {
	tx, err := db.read.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("export: begin: %w", err)
	}
	defer tx.Rollback()
	for _, q := range exportQueries {
		if err := exportTable(ctx, tx, q.query, q.scan, put); err != nil {
			return fmt.Errorf("export %s: %w", q.table, err)
		}
	}
	return tx.Commit()
}

// exportTable streams one query's rows to put.
func exportTable(ctx context.Context, tx *sql.Tx, query string, scan func(scanner) (countersign.Record, error), put func(countersign.Record) error) error {
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		rec, err := scan(rows)
		if err != nil {
			return err
		}
		if err := put(rec); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Import implements countersign.Importer, in one write transaction. The
// server keys come as they are stored: a copy sealed with a secret key
// opens only in a store opened with that same key (its check must verify);
// a copy of a store never sealed is sealed on the way in, as opening it
// with the key would have (its server keys wrapped, its chain keyed from
// the next entry on).
func (db *DB) Import(ctx context.Context, fill func(put func(countersign.Record) error) error) error {
	var check *countersign.KeyCheck
	err := db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		check = nil
		if err := checkEmpty(ctx, tx); err != nil {
			return err
		}
		err := fill(func(rec countersign.Record) error {
			if rec.KeyCheck != nil {
				if err := countersign.CheckImport(db.key, *rec.KeyCheck); err != nil {
					return err
				}
				check = rec.KeyCheck
			}
			query, args, err := recordInsert(rec)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, query, args...); err != nil {
				return fmt.Errorf("import: %w", err)
			}
			return nil
		})
		if err != nil || db.key == nil || check != nil {
			return err
		}
		c, err := sealImported(ctx, tx, db.key)
		check = &c
		return err
	})
	if err == nil && check != nil {
		db.keyedFrom.Store(check.AuditKeyedFrom)
	}
	return err
}

// sealImported seals what a copy of a store never sealed brought in.
func sealImported(ctx context.Context, tx querier, key *countersign.SecretKey) (countersign.KeyCheck, error) {
	if err := wrapServerKeys(ctx, tx, key); err != nil {
		return countersign.KeyCheck{}, fmt.Errorf("import: %w", err)
	}
	seq, _, err := auditHead(ctx, tx)
	if err != nil {
		return countersign.KeyCheck{}, err
	}
	c := key.NewKeyCheck(seq + 1)
	query, args, _ := recordInsert(countersign.Record{KeyCheck: &c})
	if _, err := tx.ExecContext(ctx, query, args...); err != nil {
		return c, fmt.Errorf("import: %w", err)
	}
	return c, nil
}

// checkEmpty fails with ECONFLICT when the store holds anything a copy
// would write.
func checkEmpty(ctx context.Context, tx querier) error {
	tables := []string{"accounts", "approvers", "memberships", "agent_keys", "approver_tokens", "webauthn_credentials", "requests",
		"links", "auto_approve_windows", "coverages", "sessions", "oauth_clients", "grants", "oauth_tokens", "notify_channels", "outbox", "server_keys", "audit_log"}
	var full []string
	for _, t := range tables {
		var n int64
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+t).Scan(&n); err != nil {
			return fmt.Errorf("import: count rows: %w", err)
		}
		if n > 0 {
			full = append(full, fmt.Sprintf("%d %s", n, strings.ReplaceAll(t, "_", " ")))
		}
	}
	if len(full) > 0 {
		return countersign.ErrTargetNotEmpty(full)
	}
	return nil
}

// recordInsert returns the statement that writes one record, verbatim.
func recordInsert(rec countersign.Record) (string, []any, error) {
	switch {
	case rec.Account != nil:
		a := rec.Account
		return `INSERT INTO accounts (id, name, created_at) VALUES (?, ?, ?)`, []any{a.ID, a.Name, nanos(a.CreatedAt)}, nil
	case rec.Approver != nil:
		a := rec.Approver
		return `INSERT INTO approvers (id, username, password_hash, created_at) VALUES (?, ?, ?, ?)`,
			[]any{a.ID, a.Username, a.PasswordHash, nanos(a.CreatedAt)}, nil
	case rec.Membership != nil:
		m := rec.Membership
		return `INSERT INTO memberships (approver_id, account_id, created_at, role) VALUES (?, ?, ?, ?)`,
			[]any{m.ApproverID, m.AccountID, nanos(m.CreatedAt), string(m.ImportedRole())}, nil
	case rec.AgentKey != nil:
		k := rec.AgentKey
		return `INSERT INTO agent_keys (` + agentKeyColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			[]any{k.ID, k.AccountID, k.Name, k.Hash, k.Hint, nanos(k.CreatedAt), nanos(k.RevokedAt), orEmpty(k.SeedSecret)}, nil
	case rec.ApproverToken != nil:
		t := rec.ApproverToken
		return `INSERT INTO approver_tokens (id, approver_id, account_id, name, hash, hint, created_at, revoked_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			[]any{t.ID, t.ApproverID, t.AccountID, t.Name, t.Hash, t.Hint, nanos(t.CreatedAt), nanos(t.RevokedAt)}, nil
	case rec.Passkey != nil:
		return passkeyInsert(rec.Passkey)
	case rec.Request != nil:
		return requestInsert(rec.Request)
	case rec.Link != nil:
		l := rec.Link
		return `INSERT INTO links (hash, request_id, action, created_at) VALUES (?, ?, ?, ?)`,
			[]any{l.Hash, l.RequestID, l.Action, nanos(l.CreatedAt)}, nil
	case rec.Window != nil:
		w := rec.Window
		return `INSERT INTO auto_approve_windows (` + windowColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			[]any{w.ID, w.AccountID, w.KeyID, w.SessionID, w.Kind, w.Action, nanos(w.Until), nanos(w.CreatedAt), w.RequestID,
				countersign.EncodeScope(w.Scope)}, nil
	case rec.Coverage != nil:
		c := rec.Coverage
		return `INSERT INTO coverages (approval_id, request_id, created_at) VALUES (?, ?, ?)`,
			[]any{c.ApprovalID, c.RequestID, nanos(c.CreatedAt)}, nil
	case rec.Session != nil:
		s := rec.Session
		return `INSERT INTO sessions (hash, approver_id, account_id, created_at, expires_at, last_seen_at, user_agent, client, grant_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			[]any{s.Hash, s.ApproverID, s.AccountID, nanos(s.CreatedAt), nanos(s.ExpiresAt), nanos(s.LastSeenAt), s.UserAgent, s.Client, s.GrantID}, nil
	case rec.OAuthClient != nil:
		args, err := oauthClientArgs(rec.OAuthClient)
		return `INSERT INTO oauth_clients (` + oauthClientColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, args, err
	case rec.Grant != nil:
		return `INSERT INTO grants (` + grantColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, grantArgs(rec.Grant), nil
	case rec.OAuthToken != nil:
		t := rec.OAuthToken
		return `INSERT INTO oauth_tokens (` + oauthTokenColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			[]any{t.Hash, t.Kind, t.GrantID, t.ClientID, t.Resource, t.RedirectURI, t.Challenge, nanos(t.CreatedAt), nanos(t.ExpiresAt), nanos(t.UsedAt)}, nil
	case rec.Channel != nil:
		c := rec.Channel
		return `INSERT INTO notify_channels (` + channelColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			[]any{c.ID, c.AccountID, c.Name, c.Type, string(c.Config), secretBytes(c.Secret), nanos(c.CreatedAt)}, nil
	case rec.OutboxItem != nil:
		it := rec.OutboxItem
		return `INSERT INTO outbox (` + outboxColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			[]any{it.ID, it.AccountID, it.ChannelID, it.RequestID, it.Event, secretBytes(it.Payload), it.State, it.Attempts,
				nanos(it.CreatedAt), nanos(it.NextAttemptAt), nanos(it.LastAttemptAt), nanos(it.LeaseUntil), it.Claim,
				it.LastError, nanos(it.FailedAt), nanos(it.DoneAt)}, nil
	case rec.ServerKey != nil:
		k := rec.ServerKey
		return `INSERT INTO server_keys (name, key, created_at) VALUES (?, ?, ?)`, []any{k.Name, orEmpty(k.Key), nanos(k.CreatedAt)}, nil
	case rec.KeyCheck != nil:
		return `INSERT INTO secret_key (id, audit_keyed_from, mac) VALUES (1, ?, ?)
			ON CONFLICT (id) DO UPDATE SET audit_keyed_from = excluded.audit_keyed_from, mac = excluded.mac`,
			[]any{rec.KeyCheck.AuditKeyedFrom, rec.KeyCheck.MAC}, nil
	case rec.AuditEntry != nil:
		e := rec.AuditEntry
		return `INSERT INTO audit_log (seq, at, account_id, request_id, event, actor, detail, prev_hash, hash)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			[]any{e.Seq, nanos(e.At), e.AccountID, e.RequestID, e.Event, e.Actor, e.Detail, e.PrevHash, e.Hash}, nil
	case rec.AuditHead != nil:
		return `INSERT INTO audit_head (id, seq, hash) VALUES (1, ?, ?)
			ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`,
			[]any{rec.AuditHead.Seq, rec.AuditHead.Hash}, nil
	}
	return "", nil, fmt.Errorf("import: an empty record")
}

// requestInsert writes a request row as it is, with every column.
func requestInsert(r *countersign.Request) (string, []any, error) {
	reasons, rctx, err := requestJSON(r)
	if err != nil {
		return "", nil, err
	}
	original, err := countersign.EncodeOriginal(r.Original)
	if err != nil {
		return "", nil, err
	}
	return `INSERT INTO requests (` + requestColumns + `, call_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		[]any{r.ID, r.AccountID, r.KeyID, r.KeyName, r.Reference, r.Kind, r.Action,
			string(r.Arguments), r.ArgsHash, r.Preview, r.PreviewHash, reasons, rctx, r.Status,
			nanos(r.CreatedAt), nanos(r.ExpiresAt), nanos(r.DecidedAt), r.DecidedBy, r.Reason, nanos(r.AutoApproveUntil),
			nanos(r.ConsumedAt), string(r.Seed), r.SeedID, r.ArgumentsText, countersign.EncodeScope(r.Scope), r.Tier, r.Protected,
			nanos(r.Ran.At), r.Ran.Action, r.Ran.ArgsHash, original, r.Context.CallID}, nil
}

// requestJSON encodes a request's risk reasons and context as
// insertRequest stores them.
func requestJSON(r *countersign.Request) (reasons, rctx string, err error) {
	b, err := json.Marshal(r.RiskReasons)
	if err != nil {
		return "", "", fmt.Errorf("encode risk reasons: %w", err)
	}
	c, err := json.Marshal(r.Context)
	if err != nil {
		return "", "", fmt.Errorf("encode request context: %w", err)
	}
	return string(b), string(c), nil
}
