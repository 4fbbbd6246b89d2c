package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign"
)

const outboxColumns = `id, account_id, channel_id, request_id, event, payload, state, attempts,
	created_at, next_attempt_at, last_attempt_at, lease_until, claim, last_error, failed_at, done_at`

// Enqueue adds pending items; see countersign.OutboxStore.
func (db *DB) Enqueue(ctx context.Context, items []countersign.OutboxItem, now time.Time) error {
	if len(items) == 0 {
		return nil
	}
	err := db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		return insertOutbox(ctx, tx, items, now)
	})
	if err == nil {
		db.outbox.Ring()
	}
	return err
}

// insertOutbox inserts pending items, leaving out those whose channel is
// gone or belongs to another account. CreateRequest calls it in its own
// transaction.
func insertOutbox(ctx context.Context, tx querier, items []countersign.OutboxItem, now time.Time) error {
	for _, it := range items {
		created := it.CreatedAt
		if created.IsZero() {
			created = now
		}
		next := it.NextAttemptAt
		if next.IsZero() {
			next = created
		}
		// INSERT … SELECT from the channel: no row when the channel is not
		// the account's, which leaves the item out.
		_, err := tx.ExecContext(ctx, `INSERT INTO outbox (id, account_id, channel_id, request_id, event, payload, state, created_at, next_attempt_at)
			SELECT ?, account_id, id, ?, ?, ?, 'pending', ?, ? FROM notify_channels WHERE id = ? AND account_id = ?`,
			orID(it.ID, "ntf_"), it.RequestID, it.Event, secretBytes(it.Payload), nanos(created), nanos(next), it.ChannelID, it.AccountID)
		if isUnique(err) {
			return countersign.ErrOutboxItemExists(it.ID)
		} else if err != nil {
			return fmt.Errorf("insert outbox item: %w", err)
		}
	}
	return nil
}

// ClaimDue leases due items; see countersign.OutboxStore. The write
// connection runs one BEGIN IMMEDIATE transaction at a time, so the
// UPDATE … RETURNING is never interleaved with another claim.
func (db *DB) ClaimDue(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]*countersign.OutboxItem, error) {
	if err := countersign.CheckClaim(limit, lease); err != nil {
		return nil, err
	}
	claim := countersign.NewID("clm_")
	var out []*countersign.OutboxItem
	err := db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		out = nil // a group run again runs this again
		rows, err := tx.QueryContext(ctx, `UPDATE outbox
			SET lease_until = ?, claim = ?, attempts = attempts + 1, last_attempt_at = ?
			WHERE id IN (SELECT id FROM outbox
				WHERE state = 'pending' AND next_attempt_at <= ? AND lease_until <= ?
				ORDER BY next_attempt_at, id LIMIT ?)
			RETURNING `+outboxColumns,
			nanos(now.Add(lease)), claim, nanos(now), nanos(now), nanos(now), limit)
		if err != nil {
			return fmt.Errorf("claim outbox items: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			it, err := scanOutbox(rows)
			if err != nil {
				return fmt.Errorf("claim outbox items: %w", err)
			}
			out = append(out, it)
		}
		return rows.Err()
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
	return db.finishAttempt(ctx, id, claim, `state = 'sent', done_at = ?, payload = x'', lease_until = 0, claim = ''`, nanos(now))
}

// MarkFailed records a failed attempt; see countersign.OutboxStore.
func (db *DB) MarkFailed(ctx context.Context, id, claim string, now, next time.Time, errText string) error {
	if next.IsZero() {
		return db.finishAttempt(ctx, id, claim,
			`state = 'failed', done_at = ?, last_error = ?, failed_at = ?, payload = x'', lease_until = 0, claim = ''`,
			nanos(now), errText, nanos(now))
	}
	return db.finishAttempt(ctx, id, claim,
		`next_attempt_at = ?, last_error = ?, failed_at = ?, lease_until = 0, claim = ''`,
		nanos(next), errText, nanos(now))
}

// finishAttempt runs the one conditional UPDATE that ends a claimed
// attempt: only the holder of the claim, and only while the item is
// pending, changes it.
func (db *DB) finishAttempt(ctx context.Context, id, claim, set string, args ...any) error {
	return db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		res, err := tx.ExecContext(ctx, `UPDATE outbox SET `+set+` WHERE id = ? AND claim = ? AND claim <> '' AND state = 'pending'`,
			append(args, id, claim)...)
		if err != nil {
			return fmt.Errorf("update outbox item: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("update outbox item: %w", err)
		} else if n == 1 {
			return nil
		}
		var found int
		err = tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox WHERE id = ?`, id).Scan(&found)
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
		st, err := db.channelStatus(ctx, c)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (db *DB) channelStatus(ctx context.Context, c *countersign.Channel) (*countersign.ChannelStatus, error) {
	st := &countersign.ChannelStatus{Channel: c}
	var lastSent, nextAttempt sql.NullInt64
	err := db.read.QueryRowContext(ctx, `SELECT
			COUNT(*) FILTER (WHERE state = 'pending'),
			COUNT(*) FILTER (WHERE state = 'pending' AND last_error <> ''),
			COUNT(*) FILTER (WHERE state = 'sent'),
			COUNT(*) FILTER (WHERE state = 'failed'),
			MAX(done_at) FILTER (WHERE state = 'sent'),
			MIN(next_attempt_at) FILTER (WHERE state = 'pending')
		FROM outbox WHERE channel_id = ?`, c.ID).
		Scan(&st.Pending, &st.Retrying, &st.Sent, &st.Failed, &lastSent, &nextAttempt)
	if err != nil {
		return nil, fmt.Errorf("read channel status: %w", err)
	}
	st.LastSentAt, st.NextAttemptAt = fromNanos(lastSent.Int64), fromNanos(nextAttempt.Int64)
	var failedAt int64
	err = db.read.QueryRowContext(ctx, `SELECT last_error, failed_at FROM outbox
		WHERE channel_id = ? AND failed_at > 0 ORDER BY failed_at DESC, id DESC LIMIT 1`, c.ID).
		Scan(&st.LastError, &failedAt)
	if err != nil && err != sql.ErrNoRows {
		return nil, fmt.Errorf("read channel status: %w", err)
	}
	st.LastErrorAt = fromNanos(failedAt)
	return st, nil
}

// PurgeOutbox removes finished items; see countersign.OutboxStore.
func (db *DB) PurgeOutbox(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE state <> 'pending' AND done_at < ?`, nanos(before))
		if err != nil {
			return fmt.Errorf("purge outbox: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

func scanOutbox(s scanner) (*countersign.OutboxItem, error) {
	var it countersign.OutboxItem
	var created, next, last, lease, failed, done int64
	err := s.Scan(&it.ID, &it.AccountID, &it.ChannelID, &it.RequestID, &it.Event, &it.Payload, &it.State, &it.Attempts,
		&created, &next, &last, &lease, &it.Claim, &it.LastError, &failed, &done)
	if err != nil {
		return nil, err
	}
	it.CreatedAt, it.NextAttemptAt, it.LastAttemptAt = fromNanos(created), fromNanos(next), fromNanos(last)
	it.LeaseUntil, it.FailedAt, it.DoneAt = fromNanos(lease), fromNanos(failed), fromNanos(done)
	if len(it.Payload) == 0 {
		it.Payload = nil
	}
	return &it, nil
}
