package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

const outboxColumns = `id, account_id, channel_id, request_id, event, payload, state, attempts,
	created_at, next_attempt_at, last_attempt_at, lease_until, claim, last_error, failed_at, done_at`

// Enqueue adds pending items; see countersign.OutboxStore.
func (db *DB) Enqueue(ctx context.Context, items []countersign.OutboxItem, now time.Time) error {
	if len(items) == 0 {
		return nil
	}
	err := db.update(ctx, func(tx pgx.Tx) error {
		return db.insertOutbox(ctx, tx, items, now)
	})
	if err == nil {
		db.outbox.Ring()
	}
	return err
}

// insertOutbox inserts pending items in one round trip, leaving out those
// whose channel is gone or belongs to another account, and announces them
// to the notification workers of the other replicas.
func (db *DB) insertOutbox(ctx context.Context, tx pgx.Tx, items []countersign.OutboxItem, now time.Time) error {
	batch := &pgx.Batch{}
	ids := queueOutbox(batch, items, now)
	queueNotify(batch, db.payload("", "", outboxMark))
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return outboxError(err, ids)
	}
	return nil
}

// queueOutbox queues the inserts of pending items, one statement each, and
// returns their ids. CreateRequest queues them in its own transaction.
func queueOutbox(batch *pgx.Batch, items []countersign.OutboxItem, now time.Time) []string {
	return queueOutboxIf(batch, items, now, "")
}

// queueOutboxIf is queueOutbox with a further condition of each insert,
// in which $2 is the item's request id; "" for none.
func queueOutboxIf(batch *pgx.Batch, items []countersign.OutboxItem, now time.Time, cond string) []string {
	if cond != "" {
		cond = " AND " + cond
	}
	ids := make([]string, len(items))
	for i, it := range items {
		created := it.CreatedAt
		if created.IsZero() {
			created = now
		}
		next := it.NextAttemptAt
		if next.IsZero() {
			next = created
		}
		ids[i] = orID(it.ID, "ntf_")
		// INSERT … SELECT from the channel: no row when the channel is not
		// the account's, which leaves the item out.
		batch.Queue(`INSERT INTO outbox (id, account_id, channel_id, request_id, event, payload, state, created_at, next_attempt_at)
			SELECT $1, account_id, id, $2, $3, $4, 'pending', $5, $6 FROM notify_channels WHERE id = $7 AND account_id = $8`+cond,
			ids[i], it.RequestID, it.Event, orEmpty(it.Payload), nanos(created), nanos(next), it.ChannelID, it.AccountID)
	}
	return ids
}

// outboxError turns the failure of an outbox insert into the errors of the
// SQLite store: a taken id is ECONFLICT, named by the server's detail.
func outboxError(err error, ids []string) error {
	if isUnique(err) {
		id := ""
		for _, cand := range ids {
			if strings.Contains(pgError(err).Detail, "("+cand+")") {
				id = cand
			}
		}
		return countersign.ErrOutboxItemExists(id)
	}
	return fmt.Errorf("insert outbox item: %w", badText(err))
}

// ClaimDue leases due items; see countersign.OutboxStore. FOR UPDATE SKIP
// LOCKED hands each item to one of several senders claiming at once: a
// row another claim holds is passed over, not waited for.
func (db *DB) ClaimDue(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]*countersign.OutboxItem, error) {
	if err := countersign.CheckClaim(limit, lease); err != nil {
		return nil, err
	}
	claim := countersign.NewID("clm_")
	var out []*countersign.OutboxItem
	err := db.update(ctx, func(tx pgx.Tx) (err error) {
		out, err = collect(ctx, tx, scanOutbox, `UPDATE outbox
			SET lease_until = $1, claim = $2, attempts = attempts + 1, last_attempt_at = $3
			WHERE id IN (SELECT id FROM outbox
				WHERE state = 'pending' AND next_attempt_at <= $3 AND lease_until <= $3
				ORDER BY next_attempt_at, id LIMIT $4 FOR UPDATE SKIP LOCKED)
			RETURNING `+outboxColumns,
			nanos(now.Add(lease)), claim, nanos(now), limit)
		if err != nil {
			return fmt.Errorf("claim outbox items: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// RETURNING promises no order.
	slices.SortFunc(out, func(a, b *countersign.OutboxItem) int {
		if c := a.NextAttemptAt.Compare(b.NextAttemptAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// MarkSent records a delivery; see countersign.OutboxStore.
func (db *DB) MarkSent(ctx context.Context, id, claim string, now time.Time) error {
	return db.finishAttempt(ctx, id, claim, `state = 'sent', done_at = $3, payload = '\x', lease_until = 0, claim = ''`, nanos(now))
}

// MarkFailed records a failed attempt; see countersign.OutboxStore.
func (db *DB) MarkFailed(ctx context.Context, id, claim string, now, next time.Time, errText string) error {
	if next.IsZero() {
		return db.finishAttempt(ctx, id, claim,
			`state = 'failed', done_at = $3, last_error = $4, failed_at = $3, payload = '\x', lease_until = 0, claim = ''`,
			nanos(now), errText)
	}
	return db.finishAttempt(ctx, id, claim,
		`next_attempt_at = $3, last_error = $4, failed_at = $5, lease_until = 0, claim = ''`,
		nanos(next), errText, nanos(now))
}

// finishAttempt runs the one conditional UPDATE that ends a claimed
// attempt: only the holder of the claim, and only while the item is
// pending, changes it. set numbers its parameters from $3 on.
func (db *DB) finishAttempt(ctx context.Context, id, claim, set string, args ...any) error {
	if hasNUL(id, claim) {
		return countersign.NotFound("outbox item")
	}
	return db.update(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE outbox SET `+set+` WHERE id = $1 AND claim = $2 AND claim <> '' AND state = 'pending'`,
			append([]any{id, claim}, args...)...)
		if err != nil {
			return fmt.Errorf("update outbox item: %w", badText(err))
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		var found int
		err = tx.QueryRow(ctx, `SELECT COUNT(*) FROM outbox WHERE id = $1`, id).Scan(&found)
		if err != nil {
			return fmt.Errorf("read outbox item: %w", err)
		}
		return countersign.RefuseAttempt(found > 0)
	})
}

// OutboxStatus returns each channel's delivery status; see
// countersign.OutboxStore.
func (db *DB) OutboxStatus(ctx context.Context, accountID string) ([]*countersign.ChannelStatus, error) {
	channels, err := db.Channels(ctx, accountID)
	if err != nil {
		return nil, err
	}
	out := make([]*countersign.ChannelStatus, 0, len(channels))
	for _, c := range channels {
		st := &countersign.ChannelStatus{Channel: c}
		err := db.read(ctx, func(q querier) error { return channelStatus(ctx, q, st) })
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func channelStatus(ctx context.Context, q querier, st *countersign.ChannelStatus) error {
	var lastSent, nextAttempt *int64
	err := q.QueryRow(ctx, `SELECT
			COUNT(*) FILTER (WHERE state = 'pending'),
			COUNT(*) FILTER (WHERE state = 'pending' AND last_error <> ''),
			COUNT(*) FILTER (WHERE state = 'sent'),
			COUNT(*) FILTER (WHERE state = 'failed'),
			MAX(done_at) FILTER (WHERE state = 'sent'),
			MIN(next_attempt_at) FILTER (WHERE state = 'pending')
		FROM outbox WHERE channel_id = $1`, st.Channel.ID).
		Scan(&st.Pending, &st.Retrying, &st.Sent, &st.Failed, &lastSent, &nextAttempt)
	if err != nil {
		return fmt.Errorf("read channel status: %w", err)
	}
	st.LastSentAt, st.NextAttemptAt = fromNanos(deref(lastSent)), fromNanos(deref(nextAttempt))
	var failedAt int64
	err = q.QueryRow(ctx, `SELECT last_error, failed_at FROM outbox
		WHERE channel_id = $1 AND failed_at > 0 ORDER BY failed_at DESC, id DESC LIMIT 1`, st.Channel.ID).
		Scan(&st.LastError, &failedAt)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("read channel status: %w", err)
	}
	st.LastErrorAt = fromNanos(failedAt)
	return nil
}

// deref returns *p, 0 for nil (SQL NULL).
func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// PurgeOutbox removes finished items; see countersign.OutboxStore.
func (db *DB) PurgeOutbox(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := db.update(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM outbox WHERE state <> 'pending' AND done_at < $1`, nanos(before))
		if err != nil {
			return fmt.Errorf("purge outbox: %w", err)
		}
		n = tag.RowsAffected()
		return nil
	})
	return int(n), err
}

func scanOutbox(s pgx.Row) (*countersign.OutboxItem, error) {
	var it countersign.OutboxItem
	var state string
	var created, next, last, lease, failed, done int64
	err := s.Scan(&it.ID, &it.AccountID, &it.ChannelID, &it.RequestID, &it.Event, &it.Payload, &state, &it.Attempts,
		&created, &next, &last, &lease, &it.Claim, &it.LastError, &failed, &done)
	if err != nil {
		return nil, err
	}
	it.State = countersign.OutboxState(state)
	it.CreatedAt, it.NextAttemptAt, it.LastAttemptAt = fromNanos(created), fromNanos(next), fromNanos(last)
	it.LeaseUntil, it.FailedAt, it.DoneAt = fromNanos(lease), fromNanos(failed), fromNanos(done)
	if len(it.Payload) == 0 {
		it.Payload = nil
	}
	return &it, nil
}
