package identity

import (
	"context"
	"regexp"
	"slices"
	"sync"

	"github.com/countersign/countersign"
)

// Admin creates and revokes accounts and credentials. The CLI and the
// server's first start both go through it.
type Admin struct {
	Store countersign.Store
	Clock countersign.Clock
}

var namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`) }) // compiled on first use: every role starts with this package

// ValidName checks the name of an account, key, approver or channel: 1 to
// 63 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or
// digit. what names the thing in the error.
func ValidName(what, name string) error {
	if !namePattern().MatchString(name) {
		return countersign.Errorf(countersign.EINVALID, "%s must be 1 to 63 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit", what)
	}
	return nil
}

func (a *Admin) now() countersign.Clock {
	if a.Clock == nil {
		return countersign.SystemClock{}
	}
	return a.Clock
}

// CreateAccount adds an account.
func (a *Admin) CreateAccount(ctx context.Context, name string) (*countersign.Account, error) {
	if err := ValidName("account name", name); err != nil {
		return nil, err
	}
	acc := &countersign.Account{ID: countersign.NewID("acc_"), Name: name, CreatedAt: a.now().Now()}
	if err := a.Store.CreateAccount(ctx, acc); err != nil {
		return nil, err
	}
	return acc, nil
}

// CreateAgentKey adds an agent key to the named account and returns it with
// its secret, which is shown once and never stored.
func (a *Admin) CreateAgentKey(ctx context.Context, account, name string) (*countersign.AgentKey, string, error) {
	return a.createAgentKey(ctx, account, name, false, "")
}

// CreateSeedKey adds an agent key designated for the seed-compatible routes,
// whose clients sign their bodies with the key itself: the server keeps the
// secret sealed under a server key beside its hash.
func (a *Admin) CreateSeedKey(ctx context.Context, account, name string) (*countersign.AgentKey, string, error) {
	return a.createAgentKey(ctx, account, name, true, "")
}

// createAgentKey adds the key; by is the approver who made it through the
// account API, "" for the operator.
func (a *Admin) createAgentKey(ctx context.Context, account, name string, seed bool, by string) (*countersign.AgentKey, string, error) {
	if err := ValidName("key name", name); err != nil {
		return nil, "", err
	}
	acc, err := a.Store.AccountByName(ctx, account)
	if err != nil {
		return nil, "", err
	}
	secret := countersign.NewSecret(countersign.AgentKeyPrefix)
	k := &countersign.AgentKey{
		ID: countersign.NewID("key_"), AccountID: acc.ID, Name: name,
		Hash: countersign.HashSecret(secret), Hint: countersign.SecretHint(secret), CreatedAt: a.now().Now(), CreatedBy: by,
	}
	if seed {
		sealed, err := sealSeedSecret(ctx, a.Store, k.ID, secret)
		if err != nil {
			return nil, "", err
		}
		k.SeedSecret = sealed
	}
	if err := a.Store.CreateAgentKey(ctx, k); err != nil {
		return nil, "", err
	}
	return k, secret, nil
}

// CreateApprover adds an approver with a password to the named account
// with a role, or adds an existing approver to it when password is empty.
// An approver already of the account keeps the role it has there.
func (a *Admin) CreateApprover(ctx context.Context, account, username, password string, role countersign.Role) (*countersign.Approver, error) {
	if err := ValidName("username", username); err != nil {
		return nil, err
	}
	if _, err := countersign.ParseRole(string(role)); err != nil {
		return nil, err
	}
	acc, err := a.Store.AccountByName(ctx, account)
	if err != nil {
		return nil, err
	}
	ap, err := a.Store.ApproverByUsername(ctx, username)
	switch {
	case err == nil && password != "":
		return nil, countersign.Errorf(countersign.ECONFLICT, "approver %q exists; to add it to another account, leave out the password", username)
	case countersign.ErrorCode(err) == countersign.ENOTFOUND:
		if err := ValidPassword(password); err != nil {
			return nil, err
		}
		ap = &countersign.Approver{ID: countersign.NewID("apr_"), Username: username, PasswordHash: HashPassword(password), CreatedAt: a.now().Now()}
		if err := a.Store.CreateApprover(ctx, ap); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	}
	if err := a.Store.AddMembership(ctx, ap.ID, acc.ID, role, a.now().Now()); err != nil {
		return nil, err
	}
	return ap, nil
}

// SetRole changes the role of an approver in the named account. Errors:
// ENOTFOUND for an unknown account or approver, or one not of the account.
func (a *Admin) SetRole(ctx context.Context, account, username string, role countersign.Role) error {
	if _, err := countersign.ParseRole(string(role)); err != nil {
		return err
	}
	acc, err := a.Store.AccountByName(ctx, account)
	if err != nil {
		return err
	}
	ap, err := a.Store.ApproverByUsername(ctx, username)
	if err != nil {
		return err
	}
	return a.Store.SetRole(ctx, ap.ID, acc.ID, role)
}

// CreateApproverToken adds an API token for an approver in one of its
// accounts (the only one when account is empty) and returns its secret,
// which is shown once and never stored.
func (a *Admin) CreateApproverToken(ctx context.Context, username, account, name string) (*countersign.ApproverToken, string, error) {
	ap, err := a.Store.ApproverByUsername(ctx, username)
	if err != nil {
		return nil, "", err
	}
	accounts, err := a.Store.Memberships(ctx, ap.ID)
	if err != nil {
		return nil, "", err
	}
	accountID, err := a.pickAccount(ctx, accounts, account)
	if err != nil {
		return nil, "", err
	}
	if name == "" {
		name = "cli"
	}
	secret := countersign.NewSecret(countersign.ApproverTokenPrefix)
	t := &countersign.ApproverToken{
		ID: countersign.NewID("tok_"), ApproverID: ap.ID, AccountID: accountID, Name: name,
		Hash: countersign.HashSecret(secret), Hint: countersign.SecretHint(secret), CreatedAt: a.now().Now(),
	}
	if err := a.Store.CreateApproverToken(ctx, t); err != nil {
		return nil, "", err
	}
	return t, secret, nil
}

func (a *Admin) pickAccount(ctx context.Context, memberOf []string, account string) (string, error) {
	if account == "" {
		if len(memberOf) != 1 {
			return "", countersign.Errorf(countersign.EINVALID, "the approver belongs to %d accounts; name one with --account", len(memberOf))
		}
		return memberOf[0], nil
	}
	acc, err := a.Store.AccountByName(ctx, account)
	if err != nil {
		return "", err
	}
	for _, id := range memberOf {
		if id == acc.ID {
			return id, nil
		}
	}
	return "", countersign.Errorf(countersign.EINVALID, "the approver is not a member of account %q", account)
}

// SetPassword gives an approver a new password, which must pass
// ValidPassword as CreateApprover's does. The approver's browser sessions
// end, and so do the grants it allowed, unless keepGrants: a password
// reset is what an operator does when the approver's credential may be in
// someone else's hands, and a grant allowed with it would outlive it. It
// returns the grants it revoked, or with keepGrants the live grants it
// kept. Errors: EINVALID, ENOTFOUND.
func (a *Admin) SetPassword(ctx context.Context, username, password string, keepGrants bool) (*countersign.Approver, []string, error) {
	ap, err := a.Store.ApproverByUsername(ctx, username)
	if err != nil {
		return nil, nil, err
	}
	if err := ValidPassword(password); err != nil {
		return nil, nil, err
	}
	grants, err := a.resetPassword(ctx, ap, HashPassword(password), keepGrants)
	return ap, grants, err
}

// resetPassword stores a new password hash and ends or keeps the
// approver's grants, returning the ones revoked or kept.
func (a *Admin) resetPassword(ctx context.Context, ap *countersign.Approver, hash string, keepGrants bool) ([]string, error) {
	revoked, err := a.Store.SetPassword(ctx, ap.ID, hash, keepGrants, a.now().Now())
	if err != nil || !keepGrants {
		return revoked, err
	}
	return a.liveGrants(ctx, ap.ID)
}

// liveGrants lists the ids of the live grants an approver allowed, in
// every account, oldest first as the store returns those it revokes.
func (a *Admin) liveGrants(ctx context.Context, approverID string) ([]string, error) {
	all, err := a.Store.Grants(ctx, "")
	if err != nil {
		return nil, err
	}
	ids := []string{}
	for _, g := range slices.Backward(all) {
		if g.ApproverID == approverID && !g.Revoked() {
			ids = append(ids, g.ID)
		}
	}
	return ids, nil
}

// DisablePassword makes an approver passkey-only and returns how many
// passkeys it signs in with, and the grants revoked (or with keepGrants
// kept), as SetPassword does. It refuses an approver without a passkey,
// who could then never sign in: the store checks it as it clears the
// password, so a passkey removed meanwhile is seen. The approver's
// browser sessions end. Errors: ENOTFOUND, ECONFLICT.
func (a *Admin) DisablePassword(ctx context.Context, username string, keepGrants bool) (int, []string, error) {
	ap, err := a.Store.ApproverByUsername(ctx, username)
	if err != nil {
		return 0, nil, err
	}
	grants, err := a.Store.ClearPassword(ctx, ap.ID, keepGrants, a.now().Now())
	if countersign.ErrorCode(err) == countersign.ECONFLICT {
		return 0, nil, countersign.Errorf(countersign.ECONFLICT, "%s has no passkey: add one first (countersign approver enrol --username %s), or the approver could never sign in", ap.Username, ap.Username)
	} else if err != nil {
		return 0, nil, err
	}
	if keepGrants {
		if grants, err = a.liveGrants(ctx, ap.ID); err != nil {
			return 0, nil, err
		}
	}
	list, err := a.Store.Passkeys(ctx, ap.ID)
	if err != nil {
		return 0, nil, err
	}
	return len(list), grants, nil
}

// RemoveApprover deletes an approver with its memberships, sessions,
// tokens and passkeys, and revokes the grants it allowed, which it
// returns. Errors: ENOTFOUND.
func (a *Admin) RemoveApprover(ctx context.Context, username string) ([]string, error) {
	ap, err := a.Store.ApproverByUsername(ctx, username)
	if err != nil {
		return nil, err
	}
	return a.Store.RemoveApprover(ctx, ap.ID, a.now().Now())
}

// RemoveMembership takes an approver out of one account, ending its
// sessions, tokens and the grants it allowed there, which it returns.
// Errors: ENOTFOUND.
func (a *Admin) RemoveMembership(ctx context.Context, username, account string) ([]string, error) {
	ap, err := a.Store.ApproverByUsername(ctx, username)
	if err != nil {
		return nil, err
	}
	acc, err := a.Store.AccountByName(ctx, account)
	if err != nil {
		return nil, err
	}
	return a.Store.RemoveMembership(ctx, ap.ID, acc.ID, a.now().Now())
}

// RevokeAgentKey revokes an agent key of the named account by id or name;
// a grant's key revokes its grant, as RevokeGrant does, and that grant is
// returned (nil for the key of no grant). Errors: ENOTFOUND, ECONFLICT.
func (a *Admin) RevokeAgentKey(ctx context.Context, account, idOrName string) (*countersign.Grant, error) {
	acc, err := a.Store.AccountByName(ctx, account)
	if err != nil {
		return nil, err
	}
	grants, err := a.Store.Grants(ctx, acc.ID)
	if err != nil {
		return nil, err
	}
	if err := a.Store.RevokeAgentKey(ctx, acc.ID, idOrName, a.now().Now()); err != nil {
		return nil, err
	}
	return keyGrant(grants, idOrName), nil
}

// keyGrant finds the grant whose key idOrName names, as the store does:
// an id wins over a name.
func keyGrant(grants []*countersign.Grant, idOrName string) *countersign.Grant {
	for _, g := range grants {
		if g.KeyID == idOrName {
			return g
		}
	}
	for _, g := range grants {
		if g.KeyName == idOrName {
			return g
		}
	}
	return nil
}

// RevokeApproverToken revokes an API token of the approver by id or name.
// Errors: ENOTFOUND, ECONFLICT.
func (a *Admin) RevokeApproverToken(ctx context.Context, username, idOrName string) error {
	ap, err := a.Store.ApproverByUsername(ctx, username)
	if err != nil {
		return err
	}
	return a.Store.RevokeApproverToken(ctx, ap.ID, idOrName, a.now().Now())
}

// RevokeGrant revokes an OAuth grant of the named account, as the inbox's
// Connections page does. Errors: ENOTFOUND, ECONFLICT.
func (a *Admin) RevokeGrant(ctx context.Context, account, id string) error {
	acc, err := a.Store.AccountByName(ctx, account)
	if err != nil {
		return err
	}
	return (&OAuth{Store: a.Store, Clock: a.now()}).RevokeGrant(ctx, acc.ID, id)
}

// RemovePasskey removes a passkey of the approver by id or name. Unlike
// the inbox, it removes a passkey-only approver's last one: it is the way
// back for an approver who lost them all. Errors: ENOTFOUND.
func (a *Admin) RemovePasskey(ctx context.Context, username, idOrName string) error {
	ap, err := a.Store.ApproverByUsername(ctx, username)
	if err != nil {
		return err
	}
	return a.Store.RemovePasskey(ctx, ap.ID, idOrName, false)
}
