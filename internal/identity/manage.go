package identity

import (
	"context"
	"slices"

	"github.com/countersign/countersign"
)

// Manager is an admin of one account managing it through the API: its
// agent keys, its approvers and their roles, its grants. Every change is
// of the principal's own account and needs its admin role (Manage).
// Creating approvers and accounts, and adding notification channels,
// whose addresses the server then connects to, stay with the operator's
// CLI on the data directory.
type Manager struct {
	admin   *Admin
	ap      countersign.ApproverPrincipal
	account *countersign.Account
}

// Manage returns the manager of the principal's account. Errors:
// EFORBIDDEN (ErrNotAdmin) for an approver who is not an admin of it.
func (a *Admin) Manage(ctx context.Context, ap countersign.ApproverPrincipal) (*Manager, error) {
	if !ap.Role.Administers() {
		return nil, ErrNotAdmin()
	}
	acc, err := a.Store.Account(ctx, ap.AccountID)
	if err != nil {
		return nil, err
	}
	return &Manager{admin: a, ap: ap, account: acc}, nil
}

// Account is the account managed.
func (m *Manager) Account() *countersign.Account { return m.account }

// Keys lists the account's agent keys, revoked or not.
func (m *Manager) Keys(ctx context.Context) ([]*countersign.AgentKey, error) {
	return m.admin.Store.AgentKeys(ctx, m.account.ID)
}

// CreateKey adds an agent key and returns it with its secret, shown once.
// The key records the admin who made it (AgentKey.CreatedBy), whom a team
// rule with separate keeps from approving its requests.
func (m *Manager) CreateKey(ctx context.Context, name string) (*countersign.AgentKey, string, error) {
	return m.admin.createAgentKey(ctx, m.account.Name, name, false, m.ap.ApproverID)
}

// RevokeKey revokes an agent key by id or name, and the grant of a
// grant's key. Errors: ENOTFOUND, ECONFLICT.
func (m *Manager) RevokeKey(ctx context.Context, idOrName string) (*countersign.Grant, error) {
	return m.admin.RevokeAgentKey(ctx, m.account.Name, idOrName)
}

// Members lists the account's approvers with their roles.
func (m *Manager) Members(ctx context.Context) ([]*countersign.Member, error) {
	return m.admin.Store.Members(ctx, m.account.ID)
}

// PutMember gives an approver a role in the account: it adds an approver
// the operator created, or changes the role of a member. It reports
// whether it added one. The account keeps at least one admin: demoting
// the last one is ECONFLICT. Errors: EINVALID, ENOTFOUND, ECONFLICT.
func (m *Manager) PutMember(ctx context.Context, username string, role countersign.Role) (added bool, err error) {
	if _, err := countersign.ParseRole(string(role)); err != nil {
		return false, err
	}
	ap, err := m.admin.Store.ApproverByUsername(ctx, username)
	if err != nil {
		return false, err
	}
	members, err := m.Members(ctx)
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(members, func(x *countersign.Member) bool { return x.ApproverID == ap.ID })
	if i < 0 {
		return true, m.admin.Store.AddMembership(ctx, ap.ID, m.account.ID, role, m.admin.now().Now())
	}
	// The store checks the last admin in the change itself: a look at
	// members here could be stale by the time of the change.
	return false, m.admin.Store.SetRoleKeepingAdmin(ctx, ap.ID, m.account.ID, role)
}

// RemoveMember takes an approver out of the account, with its sessions,
// tokens and the grants it allowed there, which it returns. The last
// admin stays. Errors: ENOTFOUND, ECONFLICT.
func (m *Manager) RemoveMember(ctx context.Context, username string) ([]string, error) {
	ap, err := m.admin.Store.ApproverByUsername(ctx, username)
	if err != nil {
		return nil, err
	}
	return m.admin.Store.RemoveMembershipKeepingAdmin(ctx, ap.ID, m.account.ID, m.admin.now().Now())
}

// Grants lists the account's OAuth grants.
func (m *Manager) Grants(ctx context.Context) ([]*countersign.Grant, error) {
	return m.admin.Store.Grants(ctx, m.account.ID)
}

// RevokeGrant revokes a grant of the account. Errors: ENOTFOUND,
// ECONFLICT.
func (m *Manager) RevokeGrant(ctx context.Context, id string) error {
	return m.admin.RevokeGrant(ctx, m.account.Name, id)
}
