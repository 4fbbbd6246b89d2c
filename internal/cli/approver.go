package cli

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/internal/approval"
)

// runApproverChange is "approver passwd" and "approver remove". A new
// password ends the approver's browser sessions; removal ends its sessions
// and tokens, in one account (--account) or everywhere.
func runApproverChange(ctx context.Context, env *Env, sub string, args []string) error {
	fs := newFlags(env, "approver "+sub)
	where := storeFlags(env, fs)
	username := fs.String("username", "", "the approver's username")
	account := fs.String("account", "", "remove: only from this account")
	stdin := fs.Bool("password-stdin", false, "passwd: read the new password from standard input instead of generating one")
	disable := fs.Bool("disable", false, "passwd: turn the password off, so that the approver signs in only with a passkey")
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
	store, err := where.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	admin := &approval.Admin{Store: store}
	switch {
	case sub == "passwd" && *disable:
		return disablePassword(ctx, env, admin, *username)
	case sub == "passwd":
		return setPassword(ctx, env, admin, *username, *stdin)
	case *account != "":
		if err := admin.RemoveMembership(ctx, *username, *account); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "removed %s from account %s; its sessions and tokens there have ended\n", *username, *account)
		return nil
	}
	if err := admin.RemoveApprover(ctx, *username); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "removed approver %s with its sessions and tokens\n", *username)
	return nil
}

// setPassword gives an approver a new password, read from standard input
// or generated and shown once.
func setPassword(ctx context.Context, env *Env, admin *approval.Admin, username string, stdin bool) error {
	password, generated := approval.NewPassword(), true
	if stdin {
		line, err := readPasswordLine(env.Stdin)
		if err != nil {
			return err
		}
		password, generated = line, false
	}
	ap, err := admin.SetPassword(ctx, username, password)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "new password for %s; its browser sessions have ended\n", ap.Username)
	if generated {
		fmt.Fprintf(env.Stdout, "password (shown once): %s\n", password)
	}
	return nil
}

// disablePassword makes an approver passkey-only. A password sign-in of a
// passkey-only approver fails as a wrong password does.
func disablePassword(ctx context.Context, env *Env, admin *approval.Admin, username string) error {
	n, err := admin.DisablePassword(ctx, username)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "password of %s turned off: it signs in only with its %d passkeys; its browser sessions have ended\n", username, n)
	fmt.Fprintf(env.Stdout, "to turn it on again: countersign approver passwd --username %s\n", username)
	return nil
}
