package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/countersign/countersign"
)

// CreateAccount adds an account, giving it an id when a.ID is empty.
// Errors: ECONFLICT if the name is taken.
func (db *DB) CreateAccount(ctx context.Context, a *countersign.Account) error {
	a.ID = orID(a.ID, "acc_")
	_, err := db.configExec(ctx, `INSERT INTO accounts (id, name, created_at) VALUES (?, ?, ?)`,
		a.ID, a.Name, nanos(a.CreatedAt))
	if isUnique(err) {
		return countersign.ErrAccountExists(a.Name)
	} else if err != nil {
		return fmt.Errorf("create account: %w", err)
	}
	return nil
}

// Account returns an account by id. Errors: ENOTFOUND.
func (db *DB) Account(ctx context.Context, id string) (*countersign.Account, error) {
	return findAccount(ctx, db.read, `id = ?`, id)
}

// AccountByName returns an account by name. Errors: ENOTFOUND.
func (db *DB) AccountByName(ctx context.Context, name string) (*countersign.Account, error) {
	return findAccount(ctx, db.read, `name = ?`, name)
}

// Accounts lists all accounts by name.
func (db *DB) Accounts(ctx context.Context) ([]*countersign.Account, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, name, created_at FROM accounts ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	defer rows.Close()
	out := []*countersign.Account{}
	for rows.Next() {
		a, err := scanAccount(rows)
		if err != nil {
			return nil, fmt.Errorf("list accounts: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	return out, nil
}

// findAccount returns the one account matching where.
func findAccount(ctx context.Context, q querier, where string, arg any) (*countersign.Account, error) {
	a, err := scanAccount(q.QueryRowContext(ctx, `SELECT id, name, created_at FROM accounts WHERE `+where, arg))
	if err == sql.ErrNoRows {
		return nil, countersign.NotFound("account")
	} else if err != nil {
		return nil, fmt.Errorf("read account: %w", err)
	}
	return a, nil
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

func scanAccount(s scanner) (*countersign.Account, error) {
	var a countersign.Account
	var created int64
	if err := s.Scan(&a.ID, &a.Name, &created); err != nil {
		return nil, err
	}
	a.CreatedAt = fromNanos(created)
	return &a, nil
}

// CreateApprover adds an approver, giving it an id when a.ID is empty.
// Errors: ECONFLICT if the username is taken.
func (db *DB) CreateApprover(ctx context.Context, a *countersign.Approver) error {
	a.ID = orID(a.ID, "apr_")
	_, err := db.configExec(ctx, `
		INSERT INTO approvers (id, username, password_hash, created_at) VALUES (?, ?, ?, ?)`,
		a.ID, a.Username, a.PasswordHash, nanos(a.CreatedAt))
	if isUnique(err) {
		return countersign.ErrApproverExists(a.Username)
	} else if err != nil {
		return fmt.Errorf("create approver: %w", err)
	}
	return nil
}

// ApproverByUsername returns an approver. Errors: ENOTFOUND.
func (db *DB) ApproverByUsername(ctx context.Context, username string) (*countersign.Approver, error) {
	var a countersign.Approver
	var created int64
	err := db.read.QueryRowContext(ctx, `
		SELECT id, username, password_hash, created_at FROM approvers WHERE username = ?`, username).
		Scan(&a.ID, &a.Username, &a.PasswordHash, &created)
	if err == sql.ErrNoRows {
		return nil, countersign.NotFound("approver")
	} else if err != nil {
		return nil, fmt.Errorf("read approver: %w", err)
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
	_, err := db.configExec(ctx, `
		INSERT INTO memberships (approver_id, account_id, role, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (approver_id, account_id) DO NOTHING`,
		approverID, accountID, string(role), nanos(at))
	if isForeignKey(err) {
		return countersign.NotFound("approver or account")
	} else if err != nil {
		return fmt.Errorf("add membership: %w", err)
	}
	return nil
}

// Memberships returns the ids of the accounts an approver belongs to, in
// the order they were added.
func (db *DB) Memberships(ctx context.Context, approverID string) ([]string, error) {
	rows, err := db.read.QueryContext(ctx, `
		SELECT account_id FROM memberships WHERE approver_id = ? ORDER BY created_at, account_id`, approverID)
	if err != nil {
		return nil, fmt.Errorf("list memberships: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list memberships: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list memberships: %w", err)
	}
	return out, nil
}

// SetRole implements countersign.Store.
func (db *DB) SetRole(ctx context.Context, approverID, accountID string, role countersign.Role) error {
	return db.setRole(ctx, approverID, accountID, role, false)
}

// SetRoleKeepingAdmin implements countersign.Store.
func (db *DB) SetRoleKeepingAdmin(ctx context.Context, approverID, accountID string, role countersign.Role) error {
	return db.setRole(ctx, approverID, accountID, role, true)
}

// keepsAdmin is the condition, on a row of memberships, that its
// account still has an admin when the row's approver is no longer one:
// the row is not an admin's, or another member of the account is an
// admin. Checked in the statement that changes the row, which the one
// writer runs alone, so that two admins taking each other's role at once
// cannot both pass it.
const keepsAdmin = `(memberships.role <> 'admin' OR EXISTS (SELECT 1 FROM memberships o
	WHERE o.account_id = memberships.account_id AND o.approver_id <> memberships.approver_id AND o.role = 'admin'))`

func (db *DB) setRole(ctx context.Context, approverID, accountID string, role countersign.Role, keepAdmin bool) error {
	if _, err := countersign.ParseRole(string(role)); err != nil {
		return err
	}
	return db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		res, err := tx.ExecContext(ctx, `UPDATE memberships SET role = ? WHERE approver_id = ? AND account_id = ?
			AND (? OR ? = 'admin' OR `+keepsAdmin+`)`,
			string(role), approverID, accountID, !keepAdmin, string(role))
		if err != nil {
			return fmt.Errorf("set role: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("set role: %w", err)
		} else if n == 0 {
			return notMemberOrLastAdmin(ctx, tx, approverID, accountID)
		}
		return nil
	})
}

// notMemberOrLastAdmin says why a change guarded by keepsAdmin changed no
// membership: the approver is a member, so it is the last admin; or it
// is not.
func notMemberOrLastAdmin(ctx context.Context, tx querier, approverID, accountID string) error {
	var member bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM memberships WHERE approver_id = ? AND account_id = ?)`,
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
	rows, err := db.read.QueryContext(ctx, `
		SELECT a.id, a.username, m.role, m.created_at FROM memberships m JOIN approvers a ON a.id = m.approver_id
		WHERE m.account_id = ? ORDER BY a.username`, accountID)
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	defer rows.Close()
	out := []*countersign.Member{}
	for rows.Next() {
		var m countersign.Member
		var created int64
		if err := rows.Scan(&m.ApproverID, &m.Username, &m.Role, &created); err != nil {
			return nil, fmt.Errorf("list members: %w", err)
		}
		m.CreatedAt = fromNanos(created)
		out = append(out, &m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	return out, nil
}
