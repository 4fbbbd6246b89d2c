package identity_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/testutil"
)

// interleaved is a store that, before its first change of a membership,
// runs another change: what a second admin's call does between the first
// one's look at the account's admins and its change.
type interleaved struct {
	countersign.Store
	once sync.Once
	then func()
}

func (s *interleaved) SetRole(ctx context.Context, approverID, accountID string, role countersign.Role) error {
	s.once.Do(s.then)
	return s.Store.SetRole(ctx, approverID, accountID, role)
}

func (s *interleaved) SetRoleKeepingAdmin(ctx context.Context, approverID, accountID string, role countersign.Role) error {
	s.once.Do(s.then)
	return s.Store.SetRoleKeepingAdmin(ctx, approverID, accountID, role)
}

func (s *interleaved) RemoveMembership(ctx context.Context, approverID, accountID string, at time.Time) ([]string, error) {
	s.once.Do(s.then)
	return s.Store.RemoveMembership(ctx, approverID, accountID, at)
}

func (s *interleaved) RemoveMembershipKeepingAdmin(ctx context.Context, approverID, accountID string, at time.Time) ([]string, error) {
	s.once.Do(s.then)
	return s.Store.RemoveMembershipKeepingAdmin(ctx, approverID, accountID, at)
}

// TestManagerKeepsLastAdminAtOnce: two admins who demote, or remove, each
// other at the same moment leave the account one admin: the change that
// comes second is refused (ECONFLICT) and changes nothing, though it saw
// two admins when it looked.
func TestManagerKeepsLastAdminAtOnce(t *testing.T) {
	t.Parallel()
	for name, change := range map[string]func(ctx context.Context, m *identity.Manager, username string) error{
		"demote": func(ctx context.Context, m *identity.Manager, username string) error {
			_, err := m.PutMember(ctx, username, countersign.RoleViewer)
			return err
		},
		"remove": func(ctx context.Context, m *identity.Manager, username string) error {
			_, err := m.RemoveMember(ctx, username)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := testutil.NewWorld(t)
			w.Approver("carol", "acme") // an admin of acme, as alice is
			manager := func(admin *identity.Admin, username string) *identity.Manager {
				t.Helper()
				ap, err := w.Auth.Approver(w.Ctx, w.Token(username, "acme"))
				if err != nil {
					t.Fatal(err)
				}
				m, err := admin.Manage(w.Ctx, ap)
				if err != nil {
					t.Fatalf("%s manages acme: %v", username, err)
				}
				return m
			}
			alice := manager(w.Admin, "alice")
			var inner error
			store := &interleaved{Store: w.Store, then: func() { inner = change(w.Ctx, alice, "carol") }}
			carol := manager(&identity.Admin{Store: store, Clock: w.Clock}, "carol")
			outer := change(w.Ctx, carol, "alice")
			if inner != nil {
				t.Fatalf("alice's change, made first: %v", inner)
			}
			wantCode(t, "carol's change, made second", outer, countersign.ECONFLICT)
			members, err := w.Store.Members(w.Ctx, w.Acme.ID)
			if err != nil {
				t.Fatal(err)
			}
			admins := 0
			for _, m := range members {
				if m.Role == countersign.RoleAdmin {
					admins++
				}
			}
			if admins != 1 {
				t.Errorf("acme has %d admins after both changes, want 1: %+v", admins, members)
			}
		})
	}
}
