package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the SQLite driver, for the history setup
)

// addHistory gives the SQLite store of srv n finished (denied) requests of
// its first account and key, created over the last n milliseconds, in one
// statement straight into the file beside the running server: a setup
// step, so that a run can be measured on a store holding a long history
// without asking for it one request at a time. Requests carry no audit
// entry of their own; nothing the server does reads one back.
func addHistory(ctx context.Context, srv *server, n int) (time.Duration, error) {
	start := time.Now()
	db, err := sql.Open("sqlite", filepath.Join(srv.data, "countersign.db")+"?_pragma=busy_timeout(30000)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var account, key, keyName string
	if err := db.QueryRowContext(ctx, `SELECT id, account_id, name FROM agent_keys ORDER BY created_at LIMIT 1`).Scan(&key, &account, &keyName); err != nil {
		return 0, fmt.Errorf("read the agent key: %w", err)
	}
	now := time.Now().UnixNano()
	_, err = db.ExecContext(ctx, `WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?1)
		INSERT INTO requests (id, account_id, key_id, key_name, reference, kind, action, arguments, args_hash,
			preview, preview_hash, risk_reasons, context, status, created_at, expires_at, decided_at, decided_by)
		SELECT printf('req_history%010d', i), ?2, ?3, ?4, printf('H%05d', i % 100000), 'tool', 'Bash',
			printf('{"n":%d}', i), printf('%064d', i), printf('run %d', i), printf('%064d', i), '["history"]',
			'{"user":"load","host":"bench"}', 'denied', ?5 - i * 1000000, ?5 - i * 1000000 + 600000000000,
			?5 - i * 1000000 + 1000000000, 'admin'
		FROM k`, n, account, key, keyName, now)
	if err != nil {
		return 0, fmt.Errorf("insert %d finished requests: %w", n, err)
	}
	// The insert left its pages in the log; they are copied into the
	// file here, so that the measured run does not pay for the setup.
	var busy, logged, copied int
	if err := db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logged, &copied); err != nil || busy != 0 {
		return 0, fmt.Errorf("checkpoint after the history: busy %d, %v", busy, err)
	}
	return time.Since(start), nil
}

// measurePendingList asks for the approver's pending list n times, one
// after the other, and returns the latencies: what an inbox or a terminal
// client waits for, whatever the account's history.
func measurePendingList(ctx context.Context, srv *server, n int) (*samples, error) {
	var s samples
	for range n {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.base+"/api/v1/requests?status=pending&limit=50", nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+srv.token)
		t := time.Now()
		resp, err := srv.metricsC.Do(req)
		if err != nil {
			return nil, fmt.Errorf("pending list: %w", err)
		}
		// The list is read to its end, as a client does; it also lets the
		// connection be used again, so that the figure is the list's and
		// not a new connection's.
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("pending list: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("pending list: status %d", resp.StatusCode)
		}
		s.add(time.Since(t))
	}
	return &s, nil
}
