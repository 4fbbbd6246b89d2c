package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

// CreateAccount adds an account, giving it an id when a.ID is empty.
// Errors: ECONFLICT if the name is taken.
func (db *DB) CreateAccount(ctx context.Context, a *countersign.Account) error {
	a.ID = orID(a.ID, "acc_")
	return db.update(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO accounts (id, name, created_at) VALUES ($1, $2, $3)`,
			a.ID, a.Name, nanos(a.CreatedAt))
		if isUnique(err) {
			return countersign.ErrAccountExists(a.Name)
		} else if err != nil {
			return fmt.Errorf("create account: %w", badText(err))
		}
		return nil
	})
}

// Account returns an account by id. Errors: ENOTFOUND.
func (db *DB) Account(ctx context.Context, id string) (*countersign.Account, error) {
	return db.findAccount(ctx, `id = $1`, id)
}

// AccountByName returns an account by name. Errors: ENOTFOUND.
func (db *DB) AccountByName(ctx context.Context, name string) (*countersign.Account, error) {
	return db.findAccount(ctx, `name = $1`, name)
}

// Accounts lists all accounts by name.
func (db *DB) Accounts(ctx context.Context) ([]*countersign.Account, error) {
	var out []*countersign.Account
	err := db.read(ctx, func(q querier) (err error) {
		out, err = collect(ctx, q, scanAccount, `SELECT id, name, created_at FROM accounts ORDER BY name`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	return out, nil
}

// findAccount returns the one account matching where.
func (db *DB) findAccount(ctx context.Context, where string, arg string) (*countersign.Account, error) {
	if hasNUL(arg) {
		return nil, countersign.NotFound("account")
	}
	var a *countersign.Account
	err := db.read(ctx, func(q querier) (err error) {
		a, err = scanAccount(q.QueryRow(ctx, `SELECT id, name, created_at FROM accounts WHERE `+where, arg))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, countersign.NotFound("account")
	} else if err != nil {
		return nil, fmt.Errorf("read account: %w", err)
	}
	return a, nil
}

func scanAccount(s pgx.Row) (*countersign.Account, error) {
	var a countersign.Account
	var created int64
	if err := s.Scan(&a.ID, &a.Name, &created); err != nil {
		return nil, err
	}
	a.CreatedAt = fromNanos(created)
	return &a, nil
}

// collect runs a query and scans every row with scan. It never returns a
// nil slice, so that an empty list is [] as in the SQLite store.
func collect[T any](ctx context.Context, q querier, scan func(pgx.Row) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// CreateApprover adds an approver, giving it an id when a.ID is empty.
// Errors: ECONFLICT if the username is taken.
func (db *DB) CreateApprover(ctx context.Context, a *countersign.Approver) error {
	a.ID = orID(a.ID, "apr_")
	return db.update(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO approvers (id, username, password_hash, created_at) VALUES ($1, $2, $3, $4)`,
			a.ID, a.Username, a.PasswordHash, nanos(a.CreatedAt))
		if isUnique(err) {
			return countersign.ErrApproverExists(a.Username)
		} else if err != nil {
			return fmt.Errorf("create approver: %w", badText(err))
		}
		return nil
	})
}

// ApproverByUsername returns an approver. Errors: ENOTFOUND.
func (db *DB) ApproverByUsername(ctx context.Context, username string) (*countersign.Approver, error) {
	if hasNUL(username) {
		return nil, countersign.NotFound("approver")
	}
	var a *countersign.Approver
	err := db.read(ctx, func(q querier) (err error) {
		a, err = scanApprover(q.QueryRow(ctx, `
			SELECT id, username, password_hash, created_at FROM approvers WHERE username = $1`, username))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, countersign.NotFound("approver")
	} else if err != nil {
		return nil, fmt.Errorf("read approver: %w", err)
	}
	return a, nil
}

func scanApprover(s pgx.Row) (*countersign.Approver, error) {
	var a countersign.Approver
	var created int64
	if err := s.Scan(&a.ID, &a.Username, &a.PasswordHash, &created); err != nil {
		return nil, err
	}
	a.CreatedAt = fromNanos(created)
	return &a, nil
}

// AddMembership makes an approver a member of an account with a role;
// adding an existing membership is not an error and keeps its role.
// Errors: ENOTFOUND when the approver or the account does not exist.
func (db *DB) AddMembership(ctx context.Context, approverID, accountID string, role countersign.Role, at time.Time) error {
	if _, err := countersign.ParseRole(string(role)); err != nil {
		return err
	}
	return db.update(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO memberships (approver_id, account_id, role, created_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (approver_id, account_id) DO NOTHING`,
			approverID, accountID, string(role), nanos(at))
		if isForeignKey(err) {
			return countersign.NotFound("approver or account")
		} else if err != nil {
			return fmt.Errorf("add membership: %w", badText(err))
		}
		return nil
	})
}

// Memberships returns the ids of the accounts an approver belongs to, in
// the order they were added.
func (db *DB) Memberships(ctx context.Context, approverID string) ([]string, error) {
	var out []string
	err := db.read(ctx, func(q querier) (err error) {
		out, err = collect(ctx, q, scanString, `
			SELECT account_id FROM memberships WHERE approver_id = $1 ORDER BY created_at, account_id`, approverID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list memberships: %w", err)
	}
	return out, nil
}

func scanString(s pgx.Row) (string, error) {
	var v string
	err := s.Scan(&v)
	return v, err
}

// SetRole implements countersign.Store.
func (db *DB) SetRole(ctx context.Context, approverID, accountID string, role countersign.Role) error {
	return db.setRole(ctx, approverID, accountID, role, false)
}

// SetRoleKeepingAdmin implements countersign.Store.
func (db *DB) SetRoleKeepingAdmin(ctx context.Context, approverID, accountID string, role countersign.Role) error {
	return db.setRole(ctx, approverID, accountID, role, true)
}

// membersLock is the first key of the advisory lock a change that keeps
// an account's last admin takes on the account.
const membersLock = 0x6373_6d62

// keepsAdmin is the condition, on a row of memberships, that its account
// still has an admin when the row's approver is no longer one: the row is
// not an admin's, or another member of the account is an admin. Two
// transactions changing different rows would each see the other's admin,
// so a change that checks it first takes the account's lock (lockMembers):
// the second one's statement starts after the first one's commit, and
// sees it.
const keepsAdmin = `(memberships.role <> 'admin' OR EXISTS (SELECT 1 FROM memberships o
	WHERE o.account_id = memberships.account_id AND o.approver_id <> memberships.approver_id AND o.role = 'admin'))`

// lockMembers takes, for the transaction, the lock of the account's
// changes that keep its last admin.
func lockMembers(ctx context.Context, tx pgx.Tx, accountID string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int4, hashtext($2))`, int32(membersLock), accountID); err != nil {
		return fmt.Errorf("lock the account's members: %w", err)
	}
	return nil
}

func (db *DB) setRole(ctx context.Context, approverID, accountID string, role countersign.Role, keepAdmin bool) error {
	if _, err := countersign.ParseRole(string(role)); err != nil {
		return err
	}
	if hasNUL(approverID) || hasNUL(accountID) {
		return countersign.ErrNotMember()
	}
	return db.update(ctx, func(tx pgx.Tx) error {
		if keepAdmin {
			if err := lockMembers(ctx, tx, accountID); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, `UPDATE memberships SET role = $1 WHERE approver_id = $2 AND account_id = $3
			AND ($4::boolean OR $1 = 'admin' OR `+keepsAdmin+`)`,
			string(role), approverID, accountID, !keepAdmin)
		if err != nil {
			return fmt.Errorf("set role: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return notMemberOrLastAdmin(ctx, tx, approverID, accountID)
		}
		return nil
	})
}

// notMemberOrLastAdmin says why a change guarded by keepsAdmin changed no
// membership: the approver is a member, so it is the last admin; or it
// is not.
func notMemberOrLastAdmin(ctx context.Context, tx pgx.Tx, approverID, accountID string) error {
	var member bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM memberships WHERE approver_id = $1 AND account_id = $2)`,
		approverID, accountID).Scan(&member); err != nil {
		return fmt.Errorf("read membership: %w", err)
	}
	if member {
		return countersign.ErrLastAdmin()
	}
	return countersign.ErrNotMember()
}

// Members implements countersign.Store.
func (db *DB) Members(ctx context.Context, accountID string) ([]*countersign.Member, error) {
	if hasNUL(accountID) {
		return []*countersign.Member{}, nil
	}
	out := []*countersign.Member{}
	err := db.read(ctx, func(q querier) (err error) {
		out, err = collect(ctx, q, func(r pgx.Row) (*countersign.Member, error) {
			var m countersign.Member
			var created int64
			err := r.Scan(&m.ApproverID, &m.Username, &m.Role, &created)
			m.CreatedAt = fromNanos(created)
			return &m, err
		}, `SELECT a.id, a.username, m.role, m.created_at FROM memberships m JOIN approvers a ON a.id = m.approver_id
			WHERE m.account_id = $1 ORDER BY a.username`, accountID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	if out == nil {
		out = []*countersign.Member{}
	}
	return out, nil
}
