package storetest

import (
	"sync"
	"testing"

	"github.com/countersign/countersign"
)

// testLastAdmin: SetRoleKeepingAdmin and RemoveMembershipKeepingAdmin
// demote and remove an admin while another admin stays, a member of
// another role always, and never the account's only admin (ErrLastAdmin,
// nothing changed); a non-member is ErrNotMember. SetRole and
// RemoveMembership, the operator's, keep no admin.
func testLastAdmin(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	acc, other := mustAccount(t, s, "one"), mustAccount(t, s, "two")
	ann, bea := approverIn(t, s, "ann", acc), approverIn(t, s, "bea", acc, other)
	vic := approverIn(t, s, "vic", acc)
	if err := s.SetRole(ctx, vic.ID, acc.ID, countersign.RoleViewer); err != nil {
		t.Fatalf("SetRole: %v", err)
	}
	roles := func(what string, want ...string) {
		t.Helper()
		same(t, what, memberRoles(t, s, acc.ID), want)
	}
	if err := s.SetRoleKeepingAdmin(ctx, ann.ID, acc.ID, countersign.RoleApprover); err != nil {
		t.Fatalf("SetRoleKeepingAdmin of one of two admins: %v", err)
	}
	wantCode(t, "SetRoleKeepingAdmin of the only admin", s.SetRoleKeepingAdmin(ctx, bea.ID, acc.ID, countersign.RoleViewer), countersign.ECONFLICT)
	_, err := s.RemoveMembershipKeepingAdmin(ctx, bea.ID, acc.ID, Base)
	wantCode(t, "RemoveMembershipKeepingAdmin of the only admin", err, countersign.ECONFLICT)
	roles("after refused changes", "ann:approver", "bea:admin", "vic:viewer")
	if err := s.SetRoleKeepingAdmin(ctx, bea.ID, acc.ID, countersign.RoleAdmin); err != nil {
		t.Errorf("SetRoleKeepingAdmin of the only admin to admin: %v", err)
	}
	if err := s.SetRoleKeepingAdmin(ctx, vic.ID, acc.ID, countersign.RoleApprover); err != nil {
		t.Errorf("SetRoleKeepingAdmin of a viewer: %v", err)
	}
	if _, err := s.RemoveMembershipKeepingAdmin(ctx, vic.ID, acc.ID, Base); err != nil {
		t.Errorf("RemoveMembershipKeepingAdmin of an approver: %v", err)
	}
	wantCode(t, "SetRoleKeepingAdmin of a non-member", s.SetRoleKeepingAdmin(ctx, vic.ID, acc.ID, countersign.RoleAdmin), countersign.ENOTFOUND)
	_, err = s.RemoveMembershipKeepingAdmin(ctx, vic.ID, acc.ID, Base)
	wantCode(t, "RemoveMembershipKeepingAdmin of a non-member", err, countersign.ENOTFOUND)
	wantCode(t, "SetRoleKeepingAdmin to an unknown role", s.SetRoleKeepingAdmin(ctx, ann.ID, acc.ID, "root"), countersign.EINVALID)
	// bea is the only admin of two as well: that is two's business.
	if err := s.SetRoleKeepingAdmin(ctx, ann.ID, acc.ID, countersign.RoleAdmin); err != nil {
		t.Fatalf("SetRoleKeepingAdmin: %v", err)
	}
	if _, err := s.RemoveMembershipKeepingAdmin(ctx, bea.ID, acc.ID, Base); err != nil {
		t.Errorf("RemoveMembershipKeepingAdmin of one of two admins: %v", err)
	}
	roles("after bea left", "ann:admin")
	wantCode(t, "SetRoleKeepingAdmin of two's only admin", s.SetRoleKeepingAdmin(ctx, bea.ID, other.ID, countersign.RoleApprover), countersign.ECONFLICT)

	// The operator's changes keep no admin.
	if err := s.SetRole(ctx, ann.ID, acc.ID, countersign.RoleViewer); err != nil {
		t.Errorf("SetRole of the only admin: %v", err)
	}
	if _, err := s.RemoveMembership(ctx, ann.ID, acc.ID, Base); err != nil {
		t.Errorf("RemoveMembership of the last member: %v", err)
	}
}

// testLastAdminRace: admins of an account who all demote or remove
// themselves at once leave exactly one admin: the check and the change
// are one step. Several rounds, since a race shows only sometimes.
func testLastAdminRace(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	const rounds, n = 4, 8
	for round := range rounds {
		acc := mustAccount(t, s, "race"+string(rune('a'+round)))
		var admins []*countersign.Approver
		for i := range n {
			admins = append(admins, approverIn(t, s, "r"+string(rune('a'+round))+string(rune('a'+i)), acc))
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		changed := 0
		start := make(chan struct{})
		for i, a := range admins {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var err error
				if i%2 == 0 {
					err = s.SetRoleKeepingAdmin(ctx, a.ID, acc.ID, countersign.RoleViewer)
				} else {
					_, err = s.RemoveMembershipKeepingAdmin(ctx, a.ID, acc.ID, Base)
				}
				mu.Lock()
				defer mu.Unlock()
				switch countersign.ErrorCode(err) {
				case "":
					changed++
				case countersign.ECONFLICT:
				default:
					t.Errorf("a change of an admin: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		members, err := s.Members(ctx, acc.ID)
		if err != nil {
			t.Fatalf("Members: %v", err)
		}
		left := 0
		for _, m := range members {
			if m.Role == countersign.RoleAdmin {
				left++
			}
		}
		if left != 1 || changed != n-1 {
			t.Fatalf("round %d: %d admins demoting or removing themselves at once made %d changes, leaving %d admins; want exactly one left", round, n, changed, left)
		}
	}
}
