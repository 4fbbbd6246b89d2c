package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// quietCheck is how long the listener waits for a notification before it
// checks that its connection still answers: a connection that died without
// a word (a network partition) would otherwise wait forever.
const quietCheck = 15 * time.Second

// Listen implements countersign.ChangeFeed. It holds a connection of its own,
// outside the pool, running LISTEN countersign, and calls onChange for
// every change committed by any other replica or process (db's own are
// passed over: see payload). When the
// connection is lost it reconnects with a growing pause (50 ms up to 5 s,
// with jitter, so that replicas do not reconnect in step) and, once
// listening again, calls onResync: what was committed in between was
// announced to nobody here. It returns nil when ctx is done. While it
// listens, a change that added outbox items rings WatchOutbox here too,
// and so does every resync: the outbox is read again for what the gap
// left unannounced.
func (db *DB) Listen(ctx context.Context, onChange func(requestID, accountID string), onResync func()) error {
	pause := db.minBackoff
	for ctx.Err() == nil {
		started := time.Now()
		err := db.listenOnce(ctx, onChange, onResync)
		if ctx.Err() != nil {
			return nil
		}
		// A connection that lasted a while was not the problem: start
		// the pauses again from the shortest.
		if time.Since(started) > time.Minute {
			pause = db.minBackoff
		}
		db.log.Warn("lost the database notification feed; reconnecting", "err", err, "retry_in", pause.Round(time.Millisecond))
		jitter := time.Duration(rand.Int64N(int64(pause)/2 + 1))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause/2 + jitter):
		}
		pause = min(2*pause, db.maxBackoff)
	}
	return nil
}

// listenOnce connects, listens, resyncs and delivers notifications until
// the connection fails or ctx is done.
func (db *DB) listenOnce(ctx context.Context, onChange func(requestID, accountID string), onResync func()) error {
	conn, err := pgx.ConnectConfig(ctx, db.listenConfig)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if db.listening != nil {
		db.listening(conn.PgConn().PID())
		defer db.listening(0)
	}
	// Listening from here on: whatever was committed before, while no one
	// listened, is caught by the waiters reading the store again.
	// Channels and credentials are kept from here on, while changes of
	// them are heard.
	db.channels.listening(true)
	defer db.channels.listening(false)
	db.creds.listening(true)
	defer db.creds.listening(false)
	db.teams.listening(true)
	defer db.teams.listening(false)
	onResync()
	db.outbox.Ring()
	db.log.Debug("listening for changes of other replicas")
	for {
		wait, cancel := context.WithTimeout(ctx, quietCheck)
		n, err := conn.WaitForNotification(wait)
		cancel()
		switch {
		case err == nil:
			// "<request id> <account id> <origin>[ <mark>]"; a replica of
			// an earlier version sends the first two alone.
			f := strings.SplitN(n.Payload, " ", 4)
			requestID, accountID, origin, mark := f[0], "", "", ""
			if len(f) > 1 {
				accountID = f[1]
			}
			if len(f) > 2 {
				origin = f[2]
			}
			if len(f) > 3 {
				mark = f[3]
			}
			if origin == db.origin {
				// Committed by this DB value, whose callers rang their
				// waiters, the outbox and the channels already.
				continue
			}
			switch mark {
			case outboxMark:
				db.outbox.Ring()
			case channelMark:
				db.channels.clear()
			case credentialMark:
				db.creds.clear()
			case teamsMark:
				db.teams.clear()
			}
			if requestID != "" {
				onChange(requestID, accountID)
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			// Quiet for a while: make sure the connection still answers.
			check, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := conn.Ping(check)
			cancel()
			if err != nil {
				return fmt.Errorf("check the connection: %w", err)
			}
		default:
			return err
		}
	}
}
