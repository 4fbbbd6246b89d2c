package sqlite

import (
	"database/sql"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/storetest"
)

// bigTable matches a full scan of a table that grows with history: such a
// query costs what the account has ever done, not what it returns.
var bigTable = regexp.MustCompile(`(?m)^\s*SCAN (requests|links|outbox|auto_approve_windows|coverages|audit_log)\b`)

// TestHotQueryPlans: every statement the hot paths run (storetest.HotPaths)
// searches the tables that grow with history by an index, never scans
// them whole, and the approver's pending list walks the account's pending
// requests alone, in order, without sorting.
func TestHotQueryPlans(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	var collect atomic.Bool
	trace := func(q string) {
		if collect.Load() {
			mu.Lock()
			seen[q] = true
			mu.Unlock()
		}
	}
	path := filepath.Join(t.TempDir(), "countersign.db")
	storetest.HotPaths(t, func(t *testing.T) countersign.Store {
		return openTest(t, path, func(o *options) { o.trace = trace })
	}, func() { collect.Store(true) })
	collect.Store(false)

	raw := rawDB(t, path)
	pendingList, oldest := 0, 0
	for q := range seen {
		if !strings.Contains(q, "requests") && !strings.Contains(q, "outbox") && !strings.Contains(q, "auto_approve_windows") {
			continue
		}
		plan := explain(t, raw, q)
		if m := bigTable.FindString(plan); m != "" {
			t.Errorf("a hot statement scans a table whole (%s):\n%s\nplan:\n%s", strings.TrimSpace(m), q, plan)
		}
		if strings.Contains(q, "status = ?") && strings.Contains(q, "ORDER BY created_at DESC, id DESC") && !strings.Contains(q, "seed_id <>") {
			pendingList++
			if !strings.Contains(plan, "USING INDEX requests_account_status_created (account_id=? AND status=?)") || strings.Contains(plan, "TEMP B-TREE") {
				t.Errorf("the pending list does not walk the account's pending requests in order:\n%s\nplan:\n%s", q, plan)
			}
		}
		if strings.Contains(q, "MIN(created_at) FROM outbox") {
			oldest++
			if !strings.Contains(plan, "SEARCH outbox USING COVERING INDEX outbox_pending_created") {
				t.Errorf("the oldest undelivered notification is not the first entry of its index:\n%s\nplan:\n%s", q, plan)
			}
		}
		if strings.Contains(q, "reference = ?") && !strings.Contains(plan, "USING INDEX requests_account_reference (account_id=? AND reference=?)") {
			t.Errorf("the lookup by reference code does not search the code's entries:\n%s\nplan:\n%s", q, plan)
		}
	}
	if pendingList == 0 || oldest == 0 {
		t.Errorf("the pending list (%d) or the store's stats (%d) were not among the %d statements run", pendingList, oldest, len(seen))
	}
}

// explain returns the query plan of q, one step a line, its parameters
// unbound: SQLite plans a statement when it prepares it.
func explain(t *testing.T, db *sql.DB, q string) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, make([]any, params(q))...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		b.WriteString(detail + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// params counts the parameters of q: each ? alone, and the highest ?N.
func params(q string) int {
	n, numbered := 0, 0
	for _, m := range regexp.MustCompile(`\?([0-9]*)`).FindAllStringSubmatch(q, -1) {
		if m[1] == "" {
			n++
		} else if k, _ := strconv.Atoi(m[1]); k > numbered {
			numbered = k
		}
	}
	return max(n, numbered)
}
