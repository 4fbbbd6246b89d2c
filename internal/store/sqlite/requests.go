package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign"
)

const requestColumns = `id, account_id, key_id, key_name, reference, kind, action,
	arguments, args_hash, preview, preview_hash, risk_reasons, context, status,
	created_at, expires_at, decided_at, decided_by, reason, auto_approve_until,
	consumed_at, seed, seed_id, arguments_text, scope, tier, protected,
	ran_at, ran_action, ran_args_hash, original`

// CreateRequest stores a new request and its audit entry, or returns the
// identical live request of the same key with created false; see
// countersign.Store. A request without an id gets one, and a zero CreatedAt
// becomes now. maxPending <= 0 means no limit. Errors: EINVALID, ELIMIT,
// ECONFLICT (the reference code is taken), ENOTFOUND (no such account or
// key).
func (db *DB) CreateRequest(ctx context.Context, r *countersign.Request, maxPending int, now time.Time, ev countersign.AuditEvent) (got *countersign.Request, created bool, err error) {
	// What needs no database is done here, off the writer.
	enc, err := encodeRequest(r)
	if err != nil {
		return nil, false, err
	}
	var row *requestRow
	var k keep
	err = db.updateKept(ctx, func(ctx context.Context, tx querier) error {
		k = db.keepStamp()
		got, row, created, err = createRequest(ctx, tx, r, enc, maxPending, now, ev)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	db.keepRequest(row, k)
	if created && len(r.Outbox) > 0 {
		db.outbox.Ring()
	}
	return got, created, nil
}

// The row is that of a new request, nil for a twin.
func createRequest(ctx context.Context, tx querier, r *countersign.Request, enc *encodedRequest, maxPending int, now time.Time, ev countersign.AuditEvent) (*countersign.Request, *requestRow, bool, error) {
	if !r.Status.Valid() {
		return nil, nil, false, countersign.ErrUnknownStatus(r.Status)
	}
	// The twin is looked for first: asking again for what is already
	// waiting is not a new request and must not hit the limit. One
	// statement looks for it and counts the account's pending requests.
	limit := countersign.PendingLimit(r, maxPending)
	twinID, pending, err := twinAndPending(ctx, tx, r, enc, limit, now)
	if err != nil {
		return nil, nil, false, err
	}
	if twinID != "" {
		twin, err := getRequest(ctx, tx, twinID)
		if i := countersign.IdempotencyFrom(ctx); err == nil && i != nil && i.Op == countersign.IdemCreate {
			err = recordIdempotent(ctx, tx, twin, false, now)
		}
		return twin, nil, false, err
	}
	if limit > 0 && pending >= limit {
		return nil, nil, false, pendingLimit(ctx, tx, r.AccountID, pending, now)
	}
	if err := windowStillOpen(ctx, tx, r); err != nil {
		return nil, nil, false, err
	}
	if err := coverageStillHeld(ctx, tx, r); err != nil {
		return nil, nil, false, err
	}
	if r.ID == "" {
		r.ID = countersign.NewOrderedID("req_")
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	got, row, err := insertRequest(ctx, tx, r, enc)
	if err != nil {
		return nil, nil, false, err
	}
	for _, l := range r.Links {
		if _, err := tx.ExecContext(ctx, `INSERT INTO links (hash, request_id, action, created_at) VALUES (?, ?, ?, ?)`,
			l.Hash, r.ID, l.Action, nanos(r.CreatedAt)); err != nil {
			return nil, nil, false, fmt.Errorf("insert link: %w", err)
		}
	}
	if err := insertOutbox(ctx, tx, r.OutboxItems(), r.CreatedAt); err != nil {
		return nil, nil, false, err
	}
	if err := appendAudit(ctx, tx, now, r.AccountID, r.ID, ev); err != nil {
		return nil, nil, false, err
	}
	if i := countersign.IdempotencyFrom(ctx); i != nil && i.Op == countersign.IdemCreate {
		if err := recordIdempotent(ctx, tx, got, true, now); err != nil {
			return nil, nil, false, err
		}
	}
	return got, row, true, nil
}

// windowStillOpen checks, for a request an auto-approve window let
// through, that the window is as it was read and that no stop of the
// session marked it since: a stop stored in between ended every approval
// of the session but this one, which did not exist yet. The mark, not a
// time, decides, so a request whose clock read a time before the stop is
// refused too. Errors: ECONFLICT.
func windowStillOpen(ctx context.Context, tx querier, r *countersign.Request) error {
	if !r.ApprovedByWindow() {
		return nil
	}
	var open bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM auto_approve_windows
		WHERE key_id = ? AND session_id = ? AND kind = ? AND until = ? AND stopped_at = 0)`,
		r.KeyID, r.Context.SessionID, r.Kind, nanos(r.AutoApproveUntil)).Scan(&open); err != nil {
		return fmt.Errorf("check the auto-approve window: %w", err)
	}
	if !open {
		return countersign.ErrWindowClosed()
	}
	return nil
}

// coverageStillHeld checks, for a delete a hook approval covered, that
// its claim on that approval stands and that no stop of the session
// marked the claim since it was made. Errors: ECONFLICT.
func coverageStillHeld(ctx context.Context, tx querier, r *countersign.Request) error {
	if !r.ApprovedByCoverage() {
		return nil
	}
	var held bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM coverages
		WHERE request_id = ? AND stopped_at = 0)`, r.ID).Scan(&held); err != nil {
		return fmt.Errorf("check the coverage: %w", err)
	}
	if !held {
		return countersign.ErrSessionStopped()
	}
	return nil
}

// twinAndPending returns the id of the pending, unexpired twin of r (""
// when there is none; see countersign.Store), and how many requests of
// the account wait unexpired, counted no further than limit (none when
// limit is 0): the common case reads a few index entries, however many
// requests wait. An approved request is never a twin: its approval covers
// the ask the human saw, once.
func twinAndPending(ctx context.Context, tx querier, r *countersign.Request, enc *encodedRequest, limit int, now time.Time) (string, int, error) {
	var twin sql.NullString
	var n int
	lo, hi := countersign.TwinTTLRange(r, now)
	err := tx.QueryRowContext(ctx, `SELECT
		(SELECT id FROM requests INDEXED BY requests_live_binding
			WHERE key_id = ? AND kind = ? AND action = ? AND args_hash = ? AND preview_hash = ?
			  AND status IN ('pending', 'approved') AND status = 'pending' AND expires_at > ? AND seed_id = ?
			  AND risk_reasons = ? AND context = ? AND expires_at - created_at BETWEEN ? AND ?
			  AND tier = ? AND protected = ?
			ORDER BY created_at DESC, id DESC LIMIT 1),
		(SELECT COUNT(*) FROM (SELECT 1 FROM requests INDEXED BY requests_account_pending
			WHERE account_id = ? AND status = 'pending' AND expires_at > ? LIMIT ?))`,
		r.KeyID, r.Kind, r.Action, r.ArgsHash, r.PreviewHash, nanos(now), r.SeedID,
		string(enc.reasons), string(enc.context), lo, hi, r.Tier, r.Protected,
		r.AccountID, nanos(now), limit).Scan(&twin, &n)
	if err != nil {
		return "", 0, fmt.Errorf("look for identical request: %w", err)
	}
	return twin.String, n, nil
}

// pendingLimit is the ELIMIT error of an account that has n requests
// waiting (see countersign.PendingLimitError).
func pendingLimit(ctx context.Context, tx querier, accountID string, n int, now time.Time) error {
	var soonest sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT MIN(expires_at) FROM requests INDEXED BY requests_account_pending
		WHERE account_id = ? AND status = 'pending' AND expires_at > ?`, accountID, nanos(now)).Scan(&soonest); err != nil {
		return fmt.Errorf("count pending requests: %w", err)
	}
	return countersign.PendingLimitError(n, fromNanos(soonest.Int64), now)
}

// encodedRequest is a request's JSON columns, encoded, and the request as
// reading its row back would give it, but for its id and creation time,
// which are settled in the transaction.
type encodedRequest struct {
	reasons, context []byte
	scope, original  string
	got              countersign.Request
}

func encodeRequest(r *countersign.Request) (*encodedRequest, error) {
	reasons, err := json.Marshal(r.RiskReasons)
	if err != nil {
		return nil, fmt.Errorf("encode risk reasons: %w", err)
	}
	rctx, err := json.Marshal(r.Context)
	if err != nil {
		return nil, fmt.Errorf("encode request context: %w", err)
	}
	// What scanRequest makes of the row: the stored JSON decoded, times
	// in UTC at nanosecond precision, no links or outbox.
	got := *r
	got.Links, got.Outbox, got.RiskReasons, got.Context = nil, nil, nil, countersign.RequestContext{}
	if err := json.Unmarshal(reasons, &got.RiskReasons); err != nil {
		return nil, fmt.Errorf("decode risk reasons: %w", err)
	}
	if err := json.Unmarshal(rctx, &got.Context); err != nil {
		return nil, fmt.Errorf("decode request context: %w", err)
	}
	got.Arguments, got.Seed = rawJSON(string(r.Arguments)), rawJSON(string(r.Seed))
	for _, t := range []*time.Time{&got.ExpiresAt, &got.DecidedAt, &got.AutoApproveUntil, &got.ConsumedAt, &got.Ran.At} {
		*t = fromNanos(nanos(*t))
	}
	scope := countersign.EncodeScope(r.Scope)
	if got.Scope, err = countersign.DecodeScope(scope); err != nil {
		return nil, fmt.Errorf("decode scope: %w", err)
	}
	original, err := countersign.EncodeOriginal(r.Original)
	if err != nil {
		return nil, err
	}
	if got.Original, err = countersign.DecodeOriginal(original); err != nil {
		return nil, fmt.Errorf("decode the original action: %w", err)
	}
	return &encodedRequest{reasons: reasons, context: rctx, scope: scope, original: original, got: got}, nil
}

// insertRequest writes r as a new row and returns the request as reading
// the row back would, without reading it.
func insertRequest(ctx context.Context, tx querier, r *countersign.Request, enc *encodedRequest) (*countersign.Request, *requestRow, error) {
	// The row is made first and written as it is, so that it is what
	// scanning the row back would give (recent.go keeps it).
	row := &requestRow{
		args: string(r.Arguments), reasons: string(enc.reasons), rctx: string(enc.context), seed: string(r.Seed), scope: enc.scope, original: enc.original,
		created: nanos(r.CreatedAt), expires: nanos(r.ExpiresAt), decided: nanos(r.DecidedAt),
		autoUntil: nanos(r.AutoApproveUntil), consumed: nanos(r.ConsumedAt), ran: nanos(r.Ran.At),
	}
	c := &row.r
	c.ID, c.AccountID, c.KeyID, c.KeyName, c.Reference, c.Kind, c.Action = r.ID, r.AccountID, r.KeyID, r.KeyName, r.Reference, r.Kind, r.Action
	c.ArgsHash, c.Preview, c.PreviewHash, c.Status = r.ArgsHash, r.Preview, r.PreviewHash, r.Status
	c.DecidedBy, c.Reason, c.SeedID, c.ArgumentsText, c.Tier, c.Protected = r.DecidedBy, r.Reason, r.SeedID, r.ArgumentsText, r.Tier, r.Protected
	c.Ran.Action, c.Ran.ArgsHash = r.Ran.Action, r.Ran.ArgsHash
	_, err := tx.ExecContext(ctx, `INSERT INTO requests (`+requestColumns+`, call_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.AccountID, c.KeyID, c.KeyName, c.Reference, c.Kind, c.Action,
		row.args, c.ArgsHash, c.Preview, c.PreviewHash, row.reasons, row.rctx, c.Status,
		row.created, row.expires, row.decided, c.DecidedBy, c.Reason, row.autoUntil,
		row.consumed, row.seed, c.SeedID, c.ArgumentsText, row.scope, c.Tier, c.Protected,
		row.ran, c.Ran.Action, c.Ran.ArgsHash, row.original, r.Context.CallID)
	switch {
	case isUnique(err) && strings.Contains(err.Error(), "requests.reference"):
		return nil, nil, fmt.Errorf("reference code %s: %w", countersign.FormatReference(r.Reference), countersign.ErrReferenceTaken)
	case isUnique(err) && strings.Contains(err.Error(), "requests.seed_id"):
		return nil, nil, countersign.ErrSeedIDTaken()
	case isUnique(err):
		return nil, nil, countersign.ErrExists("request")
	case isForeignKey(err):
		return nil, nil, countersign.NotFound("account or agent key")
	case err != nil:
		return nil, nil, fmt.Errorf("insert request: %w", err)
	}
	got := enc.got
	got.ID, got.CreatedAt = r.ID, fromNanos(nanos(r.CreatedAt))
	return &got, row, nil
}

// Request returns a request by id. Errors: ENOTFOUND. A request this
// process has just written is answered from memory (recent.go).
func (db *DB) Request(ctx context.Context, id string) (*countersign.Request, error) {
	if row := db.recentRequest(id); row != nil {
		return row.decode()
	}
	return getRequest(ctx, db.read, id)
}

func getRequest(ctx context.Context, q querier, id string) (*countersign.Request, error) {
	r, err := scanRequest(q.QueryRowContext(ctx, `SELECT `+requestColumns+` FROM requests WHERE id = ?`, id))
	if err == sql.ErrNoRows {
		return nil, countersign.ErrRequestNotFound()
	} else if err != nil {
		return nil, fmt.Errorf("read request: %w", err)
	}
	return r, nil
}

// Requests lists the requests of f.AccountID, newest first: at most
// f.Limit of them, 50 when not positive and never more than 500. Errors:
// EINVALID without an account.
func (db *DB) Requests(ctx context.Context, f countersign.RequestFilter) ([]*countersign.Request, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	where, args := []string{"account_id = ?"}, []any{f.AccountID}
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, f.Status)
	}
	if f.Reference != "" {
		where, args = append(where, "reference = ?"), append(args, f.Reference)
	}
	if f.SessionID != "" {
		where, args = append(where, "json_extract(context, '$.session_id') = ?"), append(args, f.SessionID)
	}
	if f.Kind != "" {
		where, args = append(where, "kind = ?"), append(args, f.Kind)
	}
	index := ""
	if f.SeedPrefix != "" {
		// The seed requests of an account are a few among its v1 and MCP
		// ones: requests_account_seed holds only them, newest first by
		// kind, however many others the account has.
		where = append(where, "seed_id <> ''", "substr(seed_id, 1, length(?)) = ?")
		args = append(args, f.SeedPrefix, f.SeedPrefix)
		if f.Kind != "" {
			index = " INDEXED BY requests_account_seed"
		}
	}
	if f.MatchesNothing() {
		return []*countersign.Request{}, nil
	}
	if f.Statuses != nil {
		where = append(where, "status IN (?"+strings.Repeat(", ?", len(f.Statuses)-1)+")")
		for _, st := range f.Statuses {
			args = append(args, st)
		}
	}
	limit := f.PageSize()
	args = append(args, limit)

	rows, err := db.read.QueryContext(ctx, `SELECT `+requestColumns+` FROM requests`+index+`
		WHERE `+strings.Join(where, " AND ")+`
		ORDER BY created_at DESC, id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list requests: %w", err)
	}
	defer rows.Close()
	out := []*countersign.Request{}
	for rows.Next() {
		r, err := scanRequest(rows)
		if err != nil {
			return nil, fmt.Errorf("list requests: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list requests: %w", err)
	}
	return out, nil
}

// scanRequest reads one row of requestColumns. It returns sql.ErrNoRows
// unwrapped, for the caller to turn into ENOTFOUND.
func scanRequest(s scanner) (*countersign.Request, error) {
	row, err := scanRequestRow(s)
	if err != nil {
		return nil, err
	}
	return row.decode()
}

// requestRow is a row of requestColumns as scanned: the text and integer
// columns in r, the JSON and the times not decoded yet. The writer scans
// rows; the callers decode them, off the writer.
type requestRow struct {
	r                                                   countersign.Request
	args, reasons, rctx, seed, scope, original          string
	created, expires, decided, autoUntil, consumed, ran int64
}

// scanRequestRow reads one row of requestColumns without decoding it.
func scanRequestRow(s scanner) (*requestRow, error) {
	var row requestRow
	r := &row.r
	err := s.Scan(&r.ID, &r.AccountID, &r.KeyID, &r.KeyName, &r.Reference, &r.Kind, &r.Action,
		&row.args, &r.ArgsHash, &r.Preview, &r.PreviewHash, &row.reasons, &row.rctx, &r.Status,
		&row.created, &row.expires, &row.decided, &r.DecidedBy, &r.Reason, &row.autoUntil,
		&row.consumed, &row.seed, &r.SeedID, &r.ArgumentsText, &row.scope, &r.Tier, &r.Protected,
		&row.ran, &r.Ran.Action, &r.Ran.ArgsHash, &row.original)
	if err != nil {
		return nil, err
	}
	return &row, nil
}

// decode returns the request of the row.
func (row *requestRow) decode() (*countersign.Request, error) {
	r := row.r
	if err := json.Unmarshal([]byte(row.reasons), &r.RiskReasons); err != nil {
		return nil, fmt.Errorf("decode risk reasons of %s: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(row.rctx), &r.Context); err != nil {
		return nil, fmt.Errorf("decode context of %s: %w", r.ID, err)
	}
	scope, err := countersign.DecodeScope(row.scope)
	if err != nil {
		return nil, fmt.Errorf("decode scope of %s: %w", r.ID, err)
	}
	r.Scope = scope
	if r.Original, err = countersign.DecodeOriginal(row.original); err != nil {
		return nil, fmt.Errorf("decode the original action of %s: %w", r.ID, err)
	}
	r.Arguments, r.Seed = rawJSON(row.args), rawJSON(row.seed)
	r.CreatedAt, r.ExpiresAt, r.DecidedAt = fromNanos(row.created), fromNanos(row.expires), fromNanos(row.decided)
	r.AutoApproveUntil, r.ConsumedAt, r.Ran.At = fromNanos(row.autoUntil), fromNanos(row.consumed), fromNanos(row.ran)
	return &r, nil
}

// rawJSON returns stored JSON text, nil for none.
func rawJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// RequestBySeedID returns the request a seed-compatible client named.
// Errors: ENOTFOUND.
func (db *DB) RequestBySeedID(ctx context.Context, seedID string) (*countersign.Request, error) {
	if seedID == "" {
		return nil, countersign.ErrRequestNotFound()
	}
	r, err := scanRequest(db.read.QueryRowContext(ctx, `SELECT `+requestColumns+` FROM requests WHERE seed_id = ?`, seedID))
	if err == sql.ErrNoRows {
		return nil, countersign.ErrRequestNotFound()
	} else if err != nil {
		return nil, fmt.Errorf("read request: %w", err)
	}
	return r, nil
}

// Link returns a link by the hash of its token. Errors: ENOTFOUND.
func (db *DB) Link(ctx context.Context, hash string) (*countersign.Link, error) {
	var l countersign.Link
	var created int64
	err := db.read.QueryRowContext(ctx, `SELECT hash, request_id, action, created_at FROM links WHERE hash = ?`, hash).
		Scan(&l.Hash, &l.RequestID, &l.Action, &created)
	if err == sql.ErrNoRows {
		return nil, countersign.NotFound("link")
	} else if err != nil {
		return nil, fmt.Errorf("read link: %w", err)
	}
	l.CreatedAt = fromNanos(created)
	return &l, nil
}
