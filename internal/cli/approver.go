package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// runApproverChange is "approver passwd" and "approver remove". A new
// password ends the approver's browser sessions and the grants it allowed
// (unless --keep-grants); removal ends its sessions, tokens and grants, in
// one account (--account) or everywhere.
func runApproverChange(ctx context.Context, env *Env, sub string, args []string) error {
	fs := newFlags(env, "approver "+sub)
	where := storeFlags(env, fs)
	username := fs.String("username", "", "the approver's username")
	account := fs.String("account", "", "remove: only from this account")
	stdin := fs.Bool("password-stdin", false, "passwd: read the new password from standard input instead of generating one")
	disable := fs.Bool("disable", false, "passwd: turn the password off, so that the approver signs in only with a passkey")
	keep := fs.Bool("keep-grants", false, "passwd: keep the OAuth grants the approver allowed (by default they are revoked)")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *username == "" || len(rest) > 0 {
		return fmt.Errorf("%w: countersign approver %s --username U", ErrUsage, sub)
	}
	if *disable && *stdin {
		return fmt.Errorf("%w: --disable takes no password", ErrUsage)
	}
	if *keep && sub != "passwd" {
		return fmt.Errorf("%w: --keep-grants is for approver passwd; removing an approver always revokes its grants", ErrUsage)
	}
	store, err := where.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	admin := &identity.Admin{Store: store}
	switch {
	case sub == "passwd" && *disable:
		return disablePassword(ctx, env, admin, *username, *keep)
	case sub == "passwd":
		return setPassword(ctx, env, admin, *username, *stdin, *keep)
	case *account != "":
		revoked, err := admin.RemoveMembership(ctx, *username, *account)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "removed approver %s from %s with its sessions, tokens and %s\n", *username, *account, grantCount(revoked))
		printGrants(env, "revoked", revoked)
		return nil
	}
	revoked, err := admin.RemoveApprover(ctx, *username)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "removed approver %s with its sessions, tokens, passkeys and %s\n", *username, grantCount(revoked))
	printGrants(env, "revoked", revoked)
	return nil
}

// grantCount says how many grants: "no grants", "1 grant", "2 grants".
func grantCount(ids []string) string {
	switch len(ids) {
	case 0:
		return "no grants"
	case 1:
		return "1 grant"
	}
	return fmt.Sprintf("%d grants", len(ids))
}

// printGrants names the grants an approver change revoked or kept, one a
// line, and what that means.
func printGrants(env *Env, what string, ids []string) {
	for _, id := range ids {
		fmt.Fprintf(env.Stdout, "%s grant %s\n", what, id)
	}
	switch {
	case len(ids) == 0:
	case what == "revoked":
		fmt.Fprintln(env.Stdout, "their tokens no longer work and the browsers their consent signed in are signed out")
	default:
		fmt.Fprintln(env.Stdout, "they still work; revoke one with countersign grant revoke --account A ID")
	}
}

// grantsAfterReset says what a new password did to the approver's grants.
func grantsAfterReset(ids []string, keep bool) (phrase, what string) {
	if keep {
		return "; " + grantCount(ids) + " it allowed kept (--keep-grants)", "kept"
	}
	return " and " + grantCount(ids) + " it allowed revoked", "revoked"
}

// setPassword gives an approver a new password, read from standard input
// or generated and shown once.
func setPassword(ctx context.Context, env *Env, admin *identity.Admin, username string, stdin, keep bool) error {
	password, generated := identity.NewPassword(), true
	if stdin {
		line, err := readPasswordLine(env.Stdin)
		if err != nil {
			return err
		}
		password, generated = line, false
	}
	ap, grants, err := admin.SetPassword(ctx, username, password, keep)
	if err != nil {
		return err
	}
	phrase, what := grantsAfterReset(grants, keep)
	fmt.Fprintf(env.Stdout, "new password for %s; its browser sessions have ended%s\n", ap.Username, phrase)
	printGrants(env, what, grants)
	if generated {
		fmt.Fprintf(env.Stdout, "password (shown once): %s\n", password)
	}
	return nil
}

// disablePassword makes an approver passkey-only. A password sign-in of a
// passkey-only approver fails as a wrong password does.
func disablePassword(ctx context.Context, env *Env, admin *identity.Admin, username string, keep bool) error {
	n, grants, err := admin.DisablePassword(ctx, username, keep)
	if err != nil {
		return err
	}
	phrase, what := grantsAfterReset(grants, keep)
	fmt.Fprintf(env.Stdout, "password of %s turned off: it signs in only with its %d passkeys; its browser sessions have ended%s\n", username, n, phrase)
	printGrants(env, what, grants)
	fmt.Fprintf(env.Stdout, "to turn it on again: countersign approver passwd --username %s\n", username)
	return nil
}

// runApproverRole is `countersign approver role`: the role of an approver
// in an account.
func runApproverRole(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "approver role")
	where := storeFlags(env, fs)
	username := fs.String("username", "", "the approver's username")
	account := fs.String("account", "default", "account name")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *username == "" || len(rest) != 1 {
		return fmt.Errorf("%w: countersign approver role --account A --username U viewer|approver|admin", ErrUsage)
	}
	role, err := countersign.ParseRole(rest[0])
	if err != nil {
		return err
	}
	store, err := where.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := (&identity.Admin{Store: store}).SetRole(ctx, *account, *username, role); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "approver %s is %s %s of account %s\n", *username, article(role), role, *account)
	return nil
}

// runApproverList is `countersign approver list`: an account's approvers
// and their roles.
func runApproverList(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "approver list")
	where := storeFlags(env, fs)
	account := fs.String("account", "default", "account name")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("%w: countersign approver list [--account A]", ErrUsage)
	}
	store, err := where.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	acc, err := store.AccountByName(ctx, *account)
	if err != nil {
		return err
	}
	members, err := store.Members(ctx, acc.ID)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USERNAME\tROLE\tID\tMEMBER SINCE")
	for _, m := range members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Username, m.Role, m.ApproverID, m.CreatedAt.Format(time.DateTime))
	}
	return tw.Flush()
}

// article is "an" before admin, "a" before the other roles.
func article(r countersign.Role) string {
	if r == countersign.RoleAdmin {
		return "an"
	}
	return "a"
}
