package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign"
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
	store, err := where.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	ap, err := store.ApproverByUsername(ctx, *username)
	if err != nil {
		return err
	}
	switch sub {
	case "passwd":
		if *disable {
			return disablePassword(ctx, env, store, ap, *stdin)
		}
		password, generated := approval.NewPassword(), true
		if *stdin {
			line, err := readPasswordLine(env.Stdin)
			if err != nil {
				return err
			}
			password, generated = line, false
		}
		if err := approval.ValidPassword(password); err != nil {
			return errors.New(countersign.ErrorMessage(err))
		}
		if err := store.SetPassword(ctx, ap.ID, approval.HashPassword(password)); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "new password for %s; its browser sessions have ended\n", ap.Username)
		if generated {
			fmt.Fprintf(env.Stdout, "password (shown once): %s\n", password)
		}
	case "remove":
		if *account != "" {
			acc, err := store.AccountByName(ctx, *account)
			if err != nil {
				return err
			}
			if err := store.RemoveMembership(ctx, ap.ID, acc.ID, time.Now().UTC()); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "removed %s from account %s; its sessions and tokens there have ended\n", ap.Username, acc.Name)
			return nil
		}
		if err := store.RemoveApprover(ctx, ap.ID); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "removed approver %s with its sessions and tokens\n", ap.Username)
	}
	return nil
}
