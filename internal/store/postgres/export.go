package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

// exportQueries are the tables in the order Export hands them over and
// Import needs them, each with the query that reads it whole and the scan
// that makes a record of a row.
var exportQueries = []struct {
	table string
	query string
	scan  func(pgx.Row) (countersign.Record, error)
}{
	{"accounts", `SELECT id, name, created_at FROM accounts ORDER BY created_at, id`,
		func(r pgx.Row) (countersign.Record, error) {
			a, err := scanAccount(r)
			return countersign.Record{Account: a}, err
		}},
	{"approvers", `SELECT id, username, password_hash, created_at FROM approvers ORDER BY created_at, id`,
		func(r pgx.Row) (countersign.Record, error) {
			a, err := scanApprover(r)
			return countersign.Record{Approver: a}, err
		}},
	{"memberships", `SELECT approver_id, account_id, created_at, role FROM memberships ORDER BY created_at, approver_id, account_id`,
		scanMembership},
	{"agent keys", `SELECT ` + agentKeyColumns + ` FROM agent_keys ORDER BY created_at, id`,
		func(r pgx.Row) (countersign.Record, error) {
			k, err := scanAgentKey(r)
			return countersign.Record{AgentKey: k}, err
		}},
	{"approver tokens", `SELECT ` + approverTokenColumns + ` FROM approver_tokens t ORDER BY t.created_at, t.id`,
		func(r pgx.Row) (countersign.Record, error) {
			t, err := scanApproverToken(r)
			return countersign.Record{ApproverToken: t}, err
		}},
	{"passkeys", `SELECT ` + passkeyColumns + ` FROM webauthn_credentials ORDER BY created_at, id`,
		func(r pgx.Row) (countersign.Record, error) {
			p, err := scanPasskey(r)
			return countersign.Record{Passkey: p}, err
		}},
	{"oauth clients", `SELECT ` + oauthClientColumns + ` FROM oauth_clients ORDER BY created_at, id`,
		func(r pgx.Row) (countersign.Record, error) {
			c, err := scanOAuthClient(r)
			return countersign.Record{OAuthClient: c}, err
		}},
	{"grants", `SELECT ` + grantColumns + ` FROM grants ORDER BY created_at, id`,
		func(r pgx.Row) (countersign.Record, error) {
			g, err := scanGrantRow(r)
			return countersign.Record{Grant: g}, err
		}},
	{"oauth tokens", `SELECT ` + oauthTokenColumns + ` FROM oauth_tokens ORDER BY created_at, hash`,
		func(r pgx.Row) (countersign.Record, error) {
			t, err := scanOAuthToken(r)
			return countersign.Record{OAuthToken: t}, err
		}},
	{"requests", `SELECT ` + requestColumns + ` FROM requests ORDER BY created_at, id`,
		func(r pgx.Row) (countersign.Record, error) {
			q, err := scanRequest(r)
			return countersign.Record{Request: q}, err
		}},
	{"links", `SELECT hash, request_id, action, created_at FROM links ORDER BY created_at, hash`,
		func(r pgx.Row) (countersign.Record, error) {
			l, err := scanLink(r)
			return countersign.Record{Link: l}, err
		}},
	{"auto-approve windows", `SELECT ` + windowColumns + ` FROM auto_approve_windows ORDER BY created_at, id`,
		func(r pgx.Row) (countersign.Record, error) {
			w, err := scanWindow(r)
			return countersign.Record{Window: w}, err
		}},
	{"coverages", `SELECT approval_id, request_id, created_at FROM coverages ORDER BY created_at, approval_id`,
		func(r pgx.Row) (countersign.Record, error) {
			var c countersign.Coverage
			var created int64
			err := r.Scan(&c.ApprovalID, &c.RequestID, &created)
			c.CreatedAt = fromNanos(created)
			return countersign.Record{Coverage: &c}, err
		}},
	{"sessions", `SELECT ` + sessionColumns + ` FROM sessions s ORDER BY s.created_at, s.hash`,
		func(r pgx.Row) (countersign.Record, error) {
			s, err := scanSession(r)
			return countersign.Record{Session: s}, err
		}},
	{"notification channels", `SELECT ` + channelColumns + ` FROM notify_channels ORDER BY created_at, id`,
		func(r pgx.Row) (countersign.Record, error) {
			c, err := scanChannel(r)
			return countersign.Record{Channel: c}, err
		}},
	{"outbox items", `SELECT ` + outboxColumns + ` FROM outbox ORDER BY created_at, id`,
		func(r pgx.Row) (countersign.Record, error) {
			it, err := scanOutbox(r)
			return countersign.Record{OutboxItem: it}, err
		}},
	{"server keys", `SELECT name, key, created_at FROM server_keys ORDER BY name`, scanServerKey},
	{"secret key check", `SELECT audit_keyed_from, mac FROM secret_key WHERE id = 1`, scanKeyCheck},
	{"audit entries", `SELECT seq, at, account_id, request_id, event, actor, detail, prev_hash, hash FROM audit_log ORDER BY seq`,
		func(r pgx.Row) (countersign.Record, error) {
			e, err := scanAuditEntry(r)
			return countersign.Record{AuditEntry: e}, err
		}},
	{"audit head", `SELECT seq, hash FROM audit_head WHERE id = 1`, scanAuditHead},
}

func scanMembership(r pgx.Row) (countersign.Record, error) {
	var m countersign.Membership
	var created int64
	err := r.Scan(&m.ApproverID, &m.AccountID, &created, &m.Role)
	m.CreatedAt = fromNanos(created)
	return countersign.Record{Membership: &m}, err
}

func scanKeyCheck(r pgx.Row) (countersign.Record, error) {
	var c countersign.KeyCheck
	err := r.Scan(&c.AuditKeyedFrom, &c.MAC)
	return countersign.Record{KeyCheck: &c}, err
}

func scanServerKey(r pgx.Row) (countersign.Record, error) {
	var k countersign.ServerKey
	var created int64
	err := r.Scan(&k.Name, &k.Key, &created)
	k.CreatedAt = fromNanos(created)
	return countersign.Record{ServerKey: &k}, err
}

func scanAuditHead(r pgx.Row) (countersign.Record, error) {
	var h countersign.AuditHead
	err := r.Scan(&h.Seq, &h.Hash)
	return countersign.Record{AuditHead: &h}, err
}

// Export implements countersign.Exporter. It reads in one REPEATABLE READ,
// read-only transaction: one snapshot, even while replicas keep writing.
func (db *DB) Export(ctx context.Context, put func(countersign.Record) error) error {
	tx, err := db.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("export: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	for _, q := range exportQueries {
		if err := exportTable(ctx, tx, q.query, q.scan, put); err != nil {
			return fmt.Errorf("export %s: %w", q.table, err)
		}
	}
	return tx.Commit(ctx)
}

// exportTable streams one query's rows to put. A put that writes to
// another store runs while the rows are read, so a large table never sits
// in memory whole.
func exportTable(ctx context.Context, tx pgx.Tx, query string, scan func(pgx.Row) (countersign.Record, error), put func(countersign.Record) error) error {
	rows, err := tx.Query(ctx, query)
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

// importBatch is how many rows Import sends to the server at once.
const importBatch = 500

// Import implements countersign.Importer: one transaction, rows sent in
// batches. The store must be empty but for the audit head the first
// migration writes. The server keys come as they are stored: a copy sealed
// with a secret key opens only in a store opened with that same key (its
// check must verify); a copy of a store never sealed is sealed on the way
// in, as opening it with the key would have.
func (db *DB) Import(ctx context.Context, fill func(put func(countersign.Record) error) error) error {
	var check *countersign.KeyCheck
	// A change of channels like any other: replicas forget the ones they
	// keep.
	err := db.changeChannels(ctx, func(tx pgx.Tx) error {
		check = nil
		if err := checkEmpty(ctx, tx); err != nil {
			return err
		}
		batch := &pgx.Batch{}
		flush := func() error {
			if batch.Len() == 0 {
				return nil
			}
			err := tx.SendBatch(ctx, batch).Close()
			batch = &pgx.Batch{}
			if err != nil {
				return fmt.Errorf("import: %w", badText(err))
			}
			return nil
		}
		err := fill(func(rec countersign.Record) error {
			if rec.KeyCheck != nil {
				if err := countersign.CheckImport(db.key, *rec.KeyCheck); err != nil {
					return err
				}
				check = rec.KeyCheck
			}
			if err := queueRecord(batch, rec); err != nil {
				return err
			}
			if batch.Len() >= importBatch {
				return flush()
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := flush(); err != nil || db.key == nil || check != nil {
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

// checkEmpty fails with ECONFLICT when the store holds anything a copy
// would write.
func checkEmpty(ctx context.Context, tx pgx.Tx) error {
	tables := []string{"accounts", "approvers", "memberships", "agent_keys", "approver_tokens", "webauthn_credentials", "requests",
		"links", "auto_approve_windows", "coverages", "sessions", "oauth_clients", "grants", "oauth_tokens", "notify_channels", "outbox", "server_keys", "audit_log"}
	var parts []string
	for _, t := range tables {
		parts = append(parts, fmt.Sprintf(`SELECT '%s', COUNT(*) FROM %s`, t, t))
	}
	parts = append(parts, `SELECT 'audit_head', COUNT(*) FROM audit_head WHERE seq <> 0`)
	rows, err := tx.Query(ctx, strings.Join(parts, " UNION ALL "))
	if err != nil {
		return fmt.Errorf("import: count rows: %w", err)
	}
	defer rows.Close()
	var full []string
	for rows.Next() {
		var table string
		var n int64
		if err := rows.Scan(&table, &n); err != nil {
			return fmt.Errorf("import: count rows: %w", err)
		}
		if n > 0 {
			full = append(full, fmt.Sprintf("%d %s", n, strings.ReplaceAll(table, "_", " ")))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("import: count rows: %w", err)
	}
	if len(full) > 0 {
		return countersign.ErrTargetNotEmpty(full)
	}
	return nil
}

// queueRecord queues the insert of one record, verbatim.
func queueRecord(b *pgx.Batch, rec countersign.Record) error {
	switch {
	case rec.Account != nil:
		a := rec.Account
		b.Queue(`INSERT INTO accounts (id, name, created_at) VALUES ($1, $2, $3)`, a.ID, a.Name, nanos(a.CreatedAt))
	case rec.Approver != nil:
		a := rec.Approver
		b.Queue(`INSERT INTO approvers (id, username, password_hash, created_at) VALUES ($1, $2, $3, $4)`,
			a.ID, a.Username, a.PasswordHash, nanos(a.CreatedAt))
	case rec.Membership != nil:
		m := rec.Membership
		b.Queue(`INSERT INTO memberships (approver_id, account_id, created_at, role) VALUES ($1, $2, $3, $4)`,
			m.ApproverID, m.AccountID, nanos(m.CreatedAt), string(m.ImportedRole()))
	case rec.AgentKey != nil:
		k := rec.AgentKey
		b.Queue(`INSERT INTO agent_keys (`+agentKeyColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			k.ID, k.AccountID, k.Name, k.Hash, k.Hint, nanos(k.CreatedAt), nanos(k.RevokedAt), orEmpty(k.SeedSecret))
	case rec.ApproverToken != nil:
		t := rec.ApproverToken
		b.Queue(`INSERT INTO approver_tokens (id, approver_id, account_id, name, hash, hint, created_at, revoked_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			t.ID, t.ApproverID, t.AccountID, t.Name, t.Hash, t.Hint, nanos(t.CreatedAt), nanos(t.RevokedAt))
	case rec.Passkey != nil:
		query, args, err := passkeyInsert(rec.Passkey)
		if err != nil {
			return err
		}
		b.Queue(query, args...)
	case rec.Request != nil:
		return queueRequest(b, rec.Request, false)
	case rec.Link != nil:
		queueLink(b, *rec.Link)
	case rec.Window != nil:
		queueWindowRow(b, rec.Window)
	case rec.Coverage != nil:
		c := rec.Coverage
		b.Queue(`INSERT INTO coverages (approval_id, request_id, created_at) VALUES ($1, $2, $3)`,
			c.ApprovalID, c.RequestID, nanos(c.CreatedAt))
	case rec.Session != nil:
		s := rec.Session
		b.Queue(`INSERT INTO sessions (hash, approver_id, account_id, created_at, expires_at, last_seen_at, user_agent, client, grant_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			s.Hash, s.ApproverID, s.AccountID, nanos(s.CreatedAt), nanos(s.ExpiresAt), nanos(s.LastSeenAt), s.UserAgent, s.Client, s.GrantID)
	case rec.OAuthClient != nil:
		args, err := oauthClientArgs(rec.OAuthClient)
		if err != nil {
			return err
		}
		b.Queue(`INSERT INTO oauth_clients (`+oauthClientColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, args...)
	case rec.Grant != nil:
		b.Queue(`INSERT INTO grants (`+grantColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, grantArgs(rec.Grant)...)
	case rec.OAuthToken != nil:
		t := rec.OAuthToken
		b.Queue(`INSERT INTO oauth_tokens (`+oauthTokenColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			t.Hash, t.Kind, t.GrantID, t.ClientID, t.Resource, t.RedirectURI, t.Challenge, nanos(t.CreatedAt), nanos(t.ExpiresAt), nanos(t.UsedAt))
	case rec.Channel != nil:
		c := rec.Channel
		b.Queue(`INSERT INTO notify_channels (`+channelColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			c.ID, c.AccountID, c.Name, string(c.Type), string(c.Config), orEmpty(c.Secret), nanos(c.CreatedAt))
	case rec.OutboxItem != nil:
		it := rec.OutboxItem
		b.Queue(`INSERT INTO outbox (`+outboxColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
			it.ID, it.AccountID, it.ChannelID, it.RequestID, it.Event, orEmpty(it.Payload), string(it.State), it.Attempts,
			nanos(it.CreatedAt), nanos(it.NextAttemptAt), nanos(it.LastAttemptAt), nanos(it.LeaseUntil), it.Claim,
			it.LastError, nanos(it.FailedAt), nanos(it.DoneAt))
	case rec.ServerKey != nil:
		k := rec.ServerKey
		b.Queue(`INSERT INTO server_keys (name, key, created_at) VALUES ($1, $2, $3)`, k.Name, orEmpty(k.Key), nanos(k.CreatedAt))
	case rec.KeyCheck != nil:
		b.Queue(`INSERT INTO secret_key (id, audit_keyed_from, mac) VALUES (1, $1, $2)
			ON CONFLICT (id) DO UPDATE SET audit_keyed_from = excluded.audit_keyed_from, mac = excluded.mac`,
			rec.KeyCheck.AuditKeyedFrom, rec.KeyCheck.MAC)
	case rec.AuditEntry != nil:
		e := rec.AuditEntry
		b.Queue(`INSERT INTO audit_log (seq, at, account_id, request_id, event, actor, detail, prev_hash, hash)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			e.Seq, nanos(e.At), e.AccountID, e.RequestID, e.Event, e.Actor, e.Detail, e.PrevHash, e.Hash)
	case rec.AuditHead != nil:
		b.Queue(`INSERT INTO audit_head (id, seq, hash) VALUES (1, $1, $2)
			ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`, rec.AuditHead.Seq, rec.AuditHead.Hash)
	default:
		return fmt.Errorf("import: an empty record")
	}
	return nil
}
