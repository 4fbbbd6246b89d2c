package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

// accountLock is the first key of the advisory lock a new request takes on
// its account ("csac" in ASCII); the second is the hash of the account id.
const accountLock = 0x6373_6163

// notifyChannel is the channel every committed change of a request is
// announced on, with the payload "<request id> <account id> <origin>",
// followed by " "+outboxMark when the change added outbox items; origin
// names the DB value that made it (see payload). Items added on their own
// (Enqueue) are announced with the payload "  <origin> "+outboxMark.
const notifyChannel = "countersign"

// outboxMark ends the payload of a change that added outbox items: it
// wakes the notification workers of every replica (see OutboxWatcher).
const outboxMark = "+outbox"

const requestColumns = `id, account_id, key_id, key_name, reference, kind, action,
	arguments, args_hash, preview, preview_hash, risk_reasons, context, status,
	created_at, expires_at, decided_at, decided_by, reason, auto_approve_until,
	consumed_at, seed, seed_id, arguments_text, scope, tier, protected,
	ran_at, ran_action, ran_args_hash, original`

// CreateRequest stores a new request and its audit entry, or returns the
// identical live request of the same key with created false; see
// countersign.Store. A request without an id gets one, and a zero CreatedAt
// becomes now. maxPending <= 0 means no limit. It takes two round trips:
// the checks, then the insert with its audit entry and the commit. Errors:
// EINVALID, ELIMIT, ECONFLICT (the reference code is taken), ENOTFOUND (no
// such account or key).
func (db *DB) CreateRequest(ctx context.Context, r *countersign.Request, maxPending int, now time.Time, ev countersign.AuditEvent) (got *countersign.Request, created bool, err error) {
	if !r.Status.Valid() {
		return nil, false, countersign.ErrUnknownStatus(r.Status)
	}
	err = db.pipeline(ctx, func(p *pipe) (err error) {
		got, created, err = createRequest(p, r, maxPending, now, ev)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if created && len(r.Outbox) > 0 {
		db.outbox.Ring()
	}
	return got, created, nil
}

func createRequest(p *pipe, r *countersign.Request, maxPending int, now time.Time, ev countersign.AuditEvent) (*countersign.Request, bool, error) {
	if got, err := createAtOnce(p, r, maxPending, now, ev); err != nil || got != nil {
		return got, got != nil, err
	}
	twin, waiting, err := checkCreate(p, r, maxPending, now)
	if err == nil && twin != nil {
		err = recordTwin(p, twin, now)
	}
	if err != nil || twin != nil {
		return twin, false, err
	}
	// The twin is looked for first: asking again for what is already
	// waiting is not a new request and must not hit the limit.
	if waiting != nil && waiting.n >= maxPending {
		return nil, false, waiting.limitError(now)
	}
	if r.ID == "" {
		r.ID = countersign.NewOrderedID("req_")
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	got, err := insertRequest(p, r, now, ev)
	if err != nil {
		return nil, false, err
	}
	return got, true, nil
}

// createAtOnce stores r in one round trip when it is a new request that
// waits for a human, has room under the limit and records no idempotency
// key: the account's creation lock, one INSERT … SELECT that inserts only
// when no live twin exists and fewer than maxPending requests wait (and
// announces the request from its RETURNING), the links, outbox items, the
// lock of the audit head and the entry, each only when the insert was made
// (changedHere), and the commit. It returns nil and no error when it
// stored nothing (a twin, the limit, or a request let through at once,
// which it leaves alone): the caller then takes the way of two round
// trips, which says which. r gets its id and creation time only when it
// was stored here.
func createAtOnce(p *pipe, r *countersign.Request, maxPending int, now time.Time, ev countersign.AuditEvent) (*countersign.Request, error) {
	if idem := countersign.IdempotencyFrom(p.ctx); idem != nil && idem.Op == countersign.IdemCreate {
		return nil, nil
	}
	if held, _, _ := letThroughCheck(r); held != "" {
		return nil, nil
	}
	rc := *r
	if rc.ID == "" {
		rc.ID = countersign.NewOrderedID("req_")
	}
	if rc.CreatedAt.IsZero() {
		rc.CreatedAt = now
	}
	batch := &pgx.Batch{}
	batch.Queue(`SELECT pg_advisory_xact_lock($1::int4, hashtext($2))`, int32(accountLock), rc.AccountID)
	a, err := requestValues(&rc)
	if err != nil {
		return nil, err
	}
	// The parameters of requestValues: $1 id, $2 account, $3 key, $6
	// kind, $7 action, $9 args hash, $11 preview hash, $12 risk reasons,
	// $13 context, $23 seed id, $26 tier, $27 protected.
	lo, hi := countersign.TwinTTLRange(&rc, now)
	where := `NOT EXISTS (SELECT 1 FROM requests
		WHERE key_id = $3 AND args_hash = $9 AND preview_hash = $11 AND status IN ('pending', 'approved')
		  AND ` + unindexed("status = 'pending'", "kind = $6", "action = $7", "expires_at > "+a.add(nanos(now)), "seed_id = $23",
		"risk_reasons = $12", "context = $13", "expires_at - created_at BETWEEN "+a.add(lo)+" AND "+a.add(hi),
		"tier = $26", "protected = $27") + `)`
	if countersign.PendingLimit(&rc, maxPending) > 0 {
		where += ` AND (SELECT COUNT(*) FROM requests
			WHERE account_id = $2 AND status = 'pending' AND expires_at > ` + a.add(nanos(now)) + `) < ` + a.add(maxPending)
	}
	mark := ""
	items := rc.OutboxItems()
	if len(items) > 0 {
		mark = outboxMark
	}
	batch.Queue(`INSERT INTO requests (`+requestColumns+`, session_id, call_id)
		SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text, $9::text, $10::text,
			$11::text, $12::text, $13::text, $14::text, $15::bigint, $16::bigint, $17::bigint, $18::text, $19::text, $20::bigint,
			$21::bigint, $22::text, $23::text, $24::text, $25::text, $26::text, $27::boolean, $28::bigint, $29::text, $30::text,
			$31::text, $32::text, $33::text
		WHERE `+where+`
		RETURNING `+requestColumns+`, pg_notify('`+notifyChannel+`', id || ' ' || account_id || `+a.add(p.db.payload("", "", mark)[1:])+`)::text`, a...)
	for _, l := range rc.Links {
		batch.Queue(`INSERT INTO links (hash, request_id, action, created_at) SELECT $1, $2, $3, $4 WHERE `+changedHere("$2"),
			l.Hash, rc.ID, l.Action, nanos(rc.CreatedAt))
	}
	outboxIDs := queueOutboxIf(batch, items, rc.CreatedAt, changedHere("$2"))
	p.db.queueAuditIfChanged(batch, now, auditItem{requestID: rc.ID, ev: ev})

	br := p.sendCommit(batch)
	if _, err := br.Exec(); err != nil {
		return nil, p.unsent(fmt.Errorf("lock the account: %w", err))
	}
	got, err := scanRequest(withNotified{br.QueryRow()})
	if errors.Is(err, pgx.ErrNoRows) {
		got = nil
	} else if err != nil {
		return nil, p.unsent(insertError(&rc, err))
	}
	for range rc.Links {
		if _, err := br.Exec(); err != nil {
			return nil, p.unsent(insertError(&rc, err))
		}
	}
	for range outboxIDs {
		if _, err := br.Exec(); err != nil {
			return nil, p.unsent(outboxError(err, outboxIDs))
		}
	}
	if err := auditResultsIfChanged(br, got != nil); err != nil {
		return nil, p.unsent(err)
	}
	if err := commitResult(br); err != nil {
		return nil, err
	}
	if got == nil {
		// Nothing was written: the caller begins again.
		p.began, p.committing, p.open = false, false, nil
		return nil, nil
	}
	r.ID, r.CreatedAt = rc.ID, rc.CreatedAt
	return got, nil
}

// pendingCount is how many requests of an account wait, and when the
// soonest of them expires.
type pendingCount struct {
	n       int
	soonest *int64
}

// limitError is the ELIMIT of an account at its limit (see
// countersign.PendingLimitError).
func (c *pendingCount) limitError(now time.Time) error {
	var at int64
	if c.soonest != nil {
		at = *c.soonest
	}
	return countersign.PendingLimitError(c.n, fromNanos(at), now)
}

// checkCreate, in the round trip that begins the transaction, takes the
// account's creation lock, looks for a live twin of r and, when r is
// pending and the account has a limit, counts the requests that wait. One
// creation per account at a time: the twin and the limit are checked and
// the row inserted with no other creation of the account in between, as
// SQLite's single writer guarantees.
func checkCreate(p *pipe, r *countersign.Request, maxPending int, now time.Time) (*countersign.Request, *pendingCount, error) {
	batch := &pgx.Batch{}
	batch.Queue(`SELECT pg_advisory_xact_lock($1::int4, hashtext($2))`, int32(accountLock), r.AccountID)
	// The twin: the pending, unexpired request of the same key with the
	// same binding, risk reasons, context and TTL (see countersign.Store).
	// An approved request is never a twin: its approval covers the ask
	// the human saw, once. It is looked for by requests_live_binding
	// only (see unindexed).
	reasons, rctx, err := encodeJSON(r)
	if err != nil {
		return nil, nil, err
	}
	lo, hi := countersign.TwinTTLRange(r, now)
	batch.Queue(`SELECT `+requestColumns+` FROM requests
		WHERE key_id = $1 AND args_hash = $4 AND preview_hash = $5 AND status IN ('pending', 'approved')
		  AND `+unindexed("status = 'pending'", "kind = $2", "action = $3", "expires_at > $6", "seed_id = $7",
		"risk_reasons = $8", "context = $9", "expires_at - created_at BETWEEN $10 AND $11",
		"tier = $12", "protected = $13")+`
		ORDER BY created_at DESC, id DESC LIMIT 1`,
		r.KeyID, string(r.Kind), r.Action, r.ArgsHash, r.PreviewHash, nanos(now), r.SeedID,
		reasons, rctx, lo, hi, string(r.Tier), r.Protected)
	limited := countersign.PendingLimit(r, maxPending) > 0
	if limited {
		batch.Queue(`SELECT COUNT(*), MIN(expires_at) FROM requests
			WHERE account_id = $1 AND status = 'pending' AND expires_at > $2`, r.AccountID, nanos(now))
	}
	// A request a window or a hook approval let through: no stop of the
	// session may have come in between. A stop takes the account's lock
	// too (stopApprovals): stored before, it marked the window or the
	// claim; stored after, it ends this approval with the others.
	held, heldArgs, refusal := letThroughCheck(r)
	if held != "" {
		batch.Queue(held, heldArgs...)
	}
	br := p.send(batch)
	if _, err := br.Exec(); err != nil {
		return nil, nil, fmt.Errorf("lock the account: %w", err)
	}
	twin, err := scanRequest(br.QueryRow())
	if errors.Is(err, pgx.ErrNoRows) {
		twin = nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("look for identical request: %w", badText(err))
	}
	var waiting *pendingCount
	if limited {
		waiting = &pendingCount{}
		if err := br.QueryRow().Scan(&waiting.n, &waiting.soonest); err != nil {
			return nil, nil, fmt.Errorf("count pending requests: %w", err)
		}
	}
	if held != "" {
		var ok bool
		if err := br.QueryRow().Scan(&ok); err != nil {
			return nil, nil, fmt.Errorf("check what let the request through: %w", badText(err))
		}
		if !ok {
			return nil, nil, refusal
		}
	}
	if err := br.Close(); err != nil {
		return nil, nil, fmt.Errorf("look for identical request: %w", badText(err))
	}
	return twin, waiting, nil
}

// letThroughCheck is the query, with its arguments, that tells whether
// what let r through at once still stands, and the refusal when it does
// not; "" for a request that waits for a human. For a window: it is as it
// was read and no stop marked it. For a hook approval: r's claim on it is
// unmarked. The mark, not a time, decides, so a request whose clock read
// a time before the stop is refused too.
func letThroughCheck(r *countersign.Request) (string, []any, error) {
	switch {
	case r.ApprovedByWindow():
		return `SELECT EXISTS (SELECT 1 FROM auto_approve_windows
			WHERE key_id = $1 AND session_id = $2 AND kind = $3 AND until = $4 AND stopped_at = 0)`,
			[]any{r.KeyID, r.Context.SessionID, string(r.Kind), nanos(r.AutoApproveUntil)}, countersign.ErrWindowClosed()
	case r.ApprovedByCoverage():
		return `SELECT EXISTS (SELECT 1 FROM coverages WHERE request_id = $1 AND stopped_at = 0)`,
			[]any{r.ID}, countersign.ErrSessionStopped()
	}
	return "", nil, nil
}

// insertRequest, in one round trip, inserts r with its links and outbox
// items, announces it, appends its audit entry and commits. It returns the
// stored request.
func insertRequest(p *pipe, r *countersign.Request, now time.Time, ev countersign.AuditEvent) (*countersign.Request, error) {
	batch := &pgx.Batch{}
	if err := queueRequest(batch, r, true); err != nil {
		return nil, err
	}
	for _, l := range r.Links {
		queueLink(batch, countersign.Link{Hash: l.Hash, RequestID: r.ID, Action: l.Action, CreatedAt: r.CreatedAt})
	}
	outboxIDs := queueOutbox(batch, r.OutboxItems(), r.CreatedAt)
	if len(outboxIDs) > 0 {
		queueNotify(batch, p.db.payload(r.ID, r.AccountID, outboxMark))
	} else {
		queueNotify(batch, p.db.payload(r.ID, r.AccountID, ""))
	}
	p.db.queueAudit(batch, now, auditItem{r.AccountID, r.ID, ev})
	idem := countersign.IdempotencyFrom(p.ctx)
	if idem != nil && idem.Op == countersign.IdemCreate {
		queueIdempotent(batch, idem, r, true, now)
	}

	br := p.sendCommit(batch)
	got, err := scanRequest(br.QueryRow())
	if err != nil {
		return nil, insertError(r, err)
	}
	for range r.Links {
		if _, err := br.Exec(); err != nil {
			return nil, insertError(r, err)
		}
	}
	for range outboxIDs {
		if _, err := br.Exec(); err != nil {
			return nil, outboxError(err, outboxIDs)
		}
	}
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("announce the request: %w", err)
	}
	if err := auditResults(br, 1); err != nil {
		return nil, err
	}
	if idem != nil && idem.Op == countersign.IdemCreate {
		if err := idempotentResult(br); err != nil {
			return nil, err
		}
	}
	if err := commitResult(br); err != nil {
		return nil, err
	}
	return got, nil
}

// queueNotify queues the announcement of a change of a request; it is sent
// when the transaction commits, and not at all when it rolls back.
func queueNotify(b *pgx.Batch, payload string) {
	b.Queue(`SELECT pg_notify($1, $2)`, notifyChannel, payload)
}

// payload is the text of the notification of a change of a request by
// this DB value, with mark ("" for none) at its end. The origin lets
// Listen pass over what this value committed itself: its callers ring
// their own waiters, with the request as it was committed.
func (db *DB) payload(requestID, accountID, mark string) string {
	s := requestID + " " + accountID + " " + db.origin
	if mark != "" {
		s += " " + mark
	}
	return s
}

// queueRequest queues the insert of r as a new row, returning the row
// (requestColumns) when returning is set.
func queueRequest(b *pgx.Batch, r *countersign.Request, returning bool) error {
	a, err := requestValues(r)
	if err != nil {
		return err
	}
	ret := ""
	if returning {
		ret = ` RETURNING ` + requestColumns
	}
	b.Queue(`INSERT INTO requests (`+requestColumns+`, session_id, call_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27,
			$28, $29, $30, $31, $32, $33)`+ret,
		a...)
	return nil
}

// requestValues returns the values of r's columns, requestColumns,
// session_id and call_id, as the parameters $1 to $33.
func requestValues(r *countersign.Request) (args, error) {
	reasons, rctx, err := encodeJSON(r)
	if err != nil {
		return nil, err
	}
	original, err := countersign.EncodeOriginal(r.Original)
	if err != nil {
		return nil, err
	}
	return args{r.ID, r.AccountID, r.KeyID, r.KeyName, r.Reference, string(r.Kind), r.Action,
		string(r.Arguments), r.ArgsHash, r.Preview, r.PreviewHash, reasons, rctx, string(r.Status),
		nanos(r.CreatedAt), nanos(r.ExpiresAt), nanos(r.DecidedAt), r.DecidedBy, r.Reason, nanos(r.AutoApproveUntil),
		nanos(r.ConsumedAt), string(r.Seed), r.SeedID, r.ArgumentsText, countersign.EncodeScope(r.Scope), string(r.Tier), r.Protected,
		nanos(r.Ran.At), r.Ran.Action, r.Ran.ArgsHash, original, r.Context.SessionID, r.Context.CallID}, nil
}

// encodeJSON returns the text of r's JSON columns risk_reasons and
// context, as they are stored.
func encodeJSON(r *countersign.Request) (reasons, rctx string, err error) {
	rb, err := json.Marshal(r.RiskReasons)
	if err != nil {
		return "", "", fmt.Errorf("encode risk reasons: %w", err)
	}
	cb, err := json.Marshal(r.Context)
	if err != nil {
		return "", "", fmt.Errorf("encode request context: %w", err)
	}
	return string(rb), string(cb), nil
}

// queueLink queues the insert of a one-time link.
func queueLink(b *pgx.Batch, l countersign.Link) {
	b.Queue(`INSERT INTO links (hash, request_id, action, created_at) VALUES ($1, $2, $3, $4)`,
		l.Hash, l.RequestID, l.Action, nanos(l.CreatedAt))
}

// insertError turns the failure of a request's insert into the errors of
// the SQLite store.
func insertError(r *countersign.Request, err error) error {
	pe := pgError(err)
	switch {
	case isUnique(err) && pe.ConstraintName == "requests_live_reference":
		return fmt.Errorf("reference code %s: %w", countersign.FormatReference(r.Reference), countersign.ErrReferenceTaken)
	case isUnique(err) && pe.ConstraintName == "requests_seed_id":
		return countersign.ErrSeedIDTaken()
	case isUnique(err) && pe.TableName == "requests":
		return countersign.ErrExists("request")
	case isForeignKey(err) && pe.TableName == "requests":
		return countersign.NotFound("account or agent key")
	case pe != nil && pe.TableName == "links":
		return fmt.Errorf("insert link: %w", err)
	}
	return fmt.Errorf("insert request: %w", badText(err))
}

// Request returns a request by id. Errors: ENOTFOUND.
func (db *DB) Request(ctx context.Context, id string) (*countersign.Request, error) {
	if hasNUL(id) {
		return nil, countersign.ErrRequestNotFound()
	}
	var r *countersign.Request
	err := db.read(ctx, func(q querier) (err error) {
		r, err = getRequest(ctx, q, id)
		return err
	})
	return r, err
}

func getRequest(ctx context.Context, q querier, id string) (*countersign.Request, error) {
	r, err := scanRequest(q.QueryRow(ctx, `SELECT `+requestColumns+` FROM requests WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, countersign.ErrRequestNotFound()
	} else if err != nil {
		return nil, fmt.Errorf("read request: %w", badText(err))
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
	if hasNUL(f.AccountID, string(f.Status), f.Reference, f.SessionID, string(f.Kind), f.SeedPrefix) ||
		f.MatchesNothing() {
		return []*countersign.Request{}, nil // nothing stored matches
	}
	var a args
	where := []string{"account_id = " + a.add(f.AccountID)}
	if f.Status != "" {
		where = append(where, "status = "+a.add(string(f.Status)))
	}
	if f.Reference != "" {
		where = append(where, "reference = "+a.add(f.Reference))
	}
	if f.SessionID != "" {
		where = append(where, "session_id = "+a.add(f.SessionID))
	}
	if f.Kind != "" {
		where = append(where, "kind = "+a.add(string(f.Kind)))
	}
	if f.SeedPrefix != "" {
		// The seed requests of an account are a few among its v1 and MCP
		// ones: requests_account_seed holds only them, newest first by
		// kind, however many others the account has.
		where = append(where, "seed_id <> ''", "starts_with(seed_id, "+a.add(f.SeedPrefix)+")")
	}
	if f.Statuses != nil {
		statuses := []string{} // a status with a NUL matches nothing stored
		for _, st := range f.Statuses {
			if !hasNUL(string(st)) {
				statuses = append(statuses, string(st))
			}
		}
		where = append(where, "status = ANY("+a.add(statuses)+")")
	}
	limit := f.PageSize()
	query := `SELECT ` + requestColumns + ` FROM requests
		WHERE ` + strings.Join(where, " AND ") + `
		ORDER BY created_at DESC, id DESC LIMIT ` + a.add(limit)

	var out []*countersign.Request
	err := db.read(ctx, func(q querier) (err error) {
		out, err = collect(ctx, q, scanRequest, query, a...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list requests: %w", badText(err))
	}
	return out, nil
}

// scanRequest reads one row of requestColumns. It returns pgx.ErrNoRows
// unwrapped, for the caller to turn into ENOTFOUND.
func scanRequest(s pgx.Row) (*countersign.Request, error) {
	var r countersign.Request
	var kind, status, args, reasons, rctx, seed, scope, tier, original string
	var created, expires, decided, autoUntil, consumed, ran int64
	err := s.Scan(&r.ID, &r.AccountID, &r.KeyID, &r.KeyName, &r.Reference, &kind, &r.Action,
		&args, &r.ArgsHash, &r.Preview, &r.PreviewHash, &reasons, &rctx, &status,
		&created, &expires, &decided, &r.DecidedBy, &r.Reason, &autoUntil,
		&consumed, &seed, &r.SeedID, &r.ArgumentsText, &scope, &tier, &r.Protected,
		&ran, &r.Ran.Action, &r.Ran.ArgsHash, &original)
	if err != nil {
		return nil, err
	}
	if r.Original, err = countersign.DecodeOriginal(original); err != nil {
		return nil, fmt.Errorf("decode the original action of %s: %w", r.ID, err)
	}
	if r.Scope, err = countersign.DecodeScope(scope); err != nil {
		return nil, fmt.Errorf("decode scope of %s: %w", r.ID, err)
	}
	r.Kind, r.Status, r.Tier = countersign.Kind(kind), countersign.Status(status), countersign.Tier(tier)
	if err := json.Unmarshal([]byte(reasons), &r.RiskReasons); err != nil {
		return nil, fmt.Errorf("decode risk reasons of %s: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(rctx), &r.Context); err != nil {
		return nil, fmt.Errorf("decode context of %s: %w", r.ID, err)
	}
	r.Arguments, r.Seed = rawJSON(args), rawJSON(seed)
	r.CreatedAt, r.ExpiresAt, r.DecidedAt = fromNanos(created), fromNanos(expires), fromNanos(decided)
	r.AutoApproveUntil, r.ConsumedAt, r.Ran.At = fromNanos(autoUntil), fromNanos(consumed), fromNanos(ran)
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
	if seedID == "" || hasNUL(seedID) {
		return nil, countersign.ErrRequestNotFound()
	}
	var r *countersign.Request
	err := db.read(ctx, func(q querier) (err error) {
		r, err = scanRequest(q.QueryRow(ctx, `SELECT `+requestColumns+` FROM requests WHERE seed_id = $1`, seedID))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, countersign.ErrRequestNotFound()
	} else if err != nil {
		return nil, fmt.Errorf("read request: %w", badText(err))
	}
	return r, nil
}

// Link returns a link by the hash of its token. Errors: ENOTFOUND.
func (db *DB) Link(ctx context.Context, hash string) (*countersign.Link, error) {
	if hasNUL(hash) {
		return nil, countersign.NotFound("link")
	}
	var l *countersign.Link
	err := db.read(ctx, func(q querier) (err error) {
		l, err = scanLink(q.QueryRow(ctx, `SELECT hash, request_id, action, created_at FROM links WHERE hash = $1`, hash))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, countersign.NotFound("link")
	} else if err != nil {
		return nil, fmt.Errorf("read link: %w", badText(err))
	}
	return l, nil
}

func scanLink(s pgx.Row) (*countersign.Link, error) {
	var l countersign.Link
	var created int64
	if err := s.Scan(&l.Hash, &l.RequestID, &l.Action, &created); err != nil {
		return nil, err
	}
	l.CreatedAt = fromNanos(created)
	return &l, nil
}
