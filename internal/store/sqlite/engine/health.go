package engine

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Causes of a failed write, as Stats and the metrics name them.
const (
	CauseDiskFull = "disk_full" // SQLITE_FULL: no space left for the log or the file
	CauseIO       = "io"        // SQLITE_IOERR: the disk failed a read, write or sync
	CauseReadOnly = "read_only" // SQLITE_READONLY: the file or its directory cannot be written
	CauseCantOpen = "cant_open" // SQLITE_CANTOPEN: the file, its log or its index cannot be opened
	CauseCorrupt  = "corrupt"   // SQLITE_CORRUPT or SQLITE_NOTADB
	CauseBusy     = "busy"      // SQLITE_BUSY or SQLITE_LOCKED: another process held the lock too long
	CauseOther    = "other"     // any other error of SQLite's
)

// reasons are what the health check says of a cause that stops writes;
// they name no path and no internal detail, for a page anyone may read.
var reasons = map[string]string{
	CauseDiskFull: "the store cannot write: the disk is full",
	CauseIO:       "the store cannot write: the disk reports I/O errors",
	CauseReadOnly: "the store cannot write: its file is read-only",
	CauseCantOpen: "the store cannot write: its files cannot be opened",
	CauseCorrupt:  "the store cannot write: its file is damaged",
}

// failureCause returns the cause of a failed write, "" when err is not an
// error of SQLite's (a refusal of the store's, a closed engine, a caller
// that gave up).
func failureCause(err error) string {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return ""
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		return CauseDiskFull
	case sqlite3.SQLITE_IOERR:
		return CauseIO
	case sqlite3.SQLITE_READONLY:
		return CauseReadOnly
	case sqlite3.SQLITE_CANTOPEN:
		return CauseCantOpen
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return CauseCorrupt
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return CauseBusy
	case sqlite3.SQLITE_CONSTRAINT:
		return "" // an answer of the schema's, not a failure to write
	}
	return CauseOther
}

// health is whether the store can write, and what failed since Open.
//
// An episode starts with the first write that fails for a cause in
// reasons (a full disk, say) and ends when a probe write succeeds: the
// checkpointer tries one every retryEvery meanwhile, after a truncating
// checkpoint, so that the store is reported healthy again by itself, with
// or without traffic. Each episode is logged twice: when it starts and
// when it ends, never once per failed request. A write that succeeds in
// between does not end it: one that writes nothing commits on a full disk
// too.
type health struct {
	log *slog.Logger

	failing atomic.Bool // in an episode; read on every write, so kept apart
	mu      sync.Mutex
	cause   string // of the episode
	since   time.Time
	failed  int64            // writes failed in the episode
	byCause map[string]int64 // writes failed since Open
}

// observe records the outcome of a write: a failure of SQLite's is
// counted, and one that stops writes starts an episode. It reports whether
// err was a failure for space.
func (h *health) observe(err error) (full bool) {
	cause := failureCause(err)
	if cause == "" {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byCause == nil {
		h.byCause = make(map[string]int64)
	}
	h.byCause[cause]++
	if _, stops := reasons[cause]; !stops {
		return false
	}
	if !h.failing.Load() {
		h.failing.Store(true)
		h.cause, h.since, h.failed = cause, time.Now(), 0
		h.log.Error("the store cannot write; writes fail until it can", "cause", cause, "err", err.Error())
	}
	h.failed++
	return cause == CauseDiskFull
}

// recovered ends the episode, if one is going on, after a write succeeded.
func (h *health) recovered() {
	if !h.failing.Load() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.failing.Load() {
		return
	}
	h.failing.Store(false)
	h.log.Info("the store writes again", "cause", h.cause,
		"after_seconds", time.Since(h.since).Seconds(), "failed_writes", h.failed)
}

// reason is what the health check says while writes fail, "" otherwise.
func (h *health) reason() string {
	if !h.failing.Load() {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return reasons[h.cause]
}

// failures returns how many writes failed since Open, by cause.
func (h *health) failures() map[string]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := make(map[string]int64, len(h.byCause))
	for k, v := range h.byCause {
		m[k] = v
	}
	return m
}

// WriteError returns why the store cannot write now, in words fit for
// anyone to read (no path, no internal detail), or "" when it can: the
// last write failed for a full disk, an I/O error, a read-only or damaged
// file, and no write has succeeded since.
func (db *DB) WriteError() string { return db.health.reason() }

// probe tries a write that changes nothing the store holds: it rewrites
// the database header's user version, which takes a frame of the log like
// any change. It runs through the writer, after what is queued.
func (db *DB) probe(ctx context.Context) error {
	err := db.UpdateUncached(ctx, func(ctx context.Context, tx Querier) error {
		var v int64
		if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `PRAGMA user_version = `+strconv.FormatInt(v, 10))
		return err
	})
	if err == nil {
		db.health.recovered()
	}

	return err
}

// logSize returns the size of the write-ahead log in bytes, 0 when there
// is none.
func (db *DB) logSize() int64 {
	fi, err := os.Stat(db.path + "-wal")
	if err != nil {
		return 0
	}
	return fi.Size()
}
