package cli

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// runApproverPasskeys is "approver passkeys": it lists an approver's
// passkeys, and removes one with --remove. It works on the server's store,
// not through the inbox, so it is the way back for a passkey-only approver
// who lost every passkey: remove the lost ones, then enrol a new one or set
// a password.
func runApproverPasskeys(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "approver passkeys")
	where := storeFlags(env, fs)
	username := fs.String("username", "", "the approver's username")
	remove := fs.String("remove", "", "remove the passkey of this id or name")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *username == "" || len(rest) > 0 {
		return fmt.Errorf("%w: countersign approver passkeys --username U [--remove ID]", ErrUsage)
	}
	store, err := where.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	if *remove != "" {
		if err := (&identity.Admin{Store: store}).RemovePasskey(ctx, *username, *remove); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "removed passkey %s of %s\n", *remove, *username)
		return nil
	}
	ap, err := store.ApproverByUsername(ctx, *username)
	if err != nil {
		return err
	}
	list, err := store.Passkeys(ctx, ap.ID)
	if err != nil {
		return err
	}
	password := "on"
	if ap.PasswordHash == "" {
		password = "off (passkey-only)"
	}
	fmt.Fprintf(env.Stdout, "approver %s: %d passkeys, password %s\n", ap.Username, len(list), password)
	for _, pk := range list {
		used := "never used"
		if !pk.LastUsedAt.IsZero() {
			used = "last used " + pk.LastUsedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(env.Stdout, "%s\t%s\tadded %s\t%s\tcredential %s\n", pk.ID, pk.Name,
			pk.CreatedAt.UTC().Format(time.RFC3339), used, identity.CredentialID(pk))
	}
	return nil
}

// runApproverEnrol is "approver enrol": it prints a one-time link that adds
// a passkey to the approver without a sign-in, valid for
// identity.EnrolTTL. The link is built on the public URL.
func runApproverEnrol(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "approver enrol")
	where := storeFlags(env, fs)
	username := fs.String("username", "", "the approver's username")
	public := fs.String("public-url", env.Getenv("COUNTERSIGN_PUBLIC_URL"), "URL where people reach the server (COUNTERSIGN_PUBLIC_URL)")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *username == "" || len(rest) > 0 {
		return fmt.Errorf("%w: countersign approver enrol --username U", ErrUsage)
	}
	if *public == "" {
		return fmt.Errorf("%w: set COUNTERSIGN_PUBLIC_URL (or --public-url) to the server's address, as countersign serve has it", ErrUsage)
	}
	u, err := url.Parse(*public)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: public URL %q must be http(s)://host[:port]", ErrUsage, *public)
	}
	store, err := where.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	pk, err := identity.NewPasskeys(store, countersign.SystemClock{}, nil, u)
	if err != nil {
		return err
	}
	ap, err := store.ApproverByUsername(ctx, *username)
	if err != nil {
		return err
	}
	token, expires, err := pk.NewEnrolment(ctx, ap.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "one-time link to add a passkey for %s, valid until %s:\n%s/enrol/%s\n",
		ap.Username, expires.UTC().Format(time.RFC3339), strings.TrimRight(u.String(), "/"), token)
	fmt.Fprintln(env.Stdout, "whoever opens it can add a passkey for this approver: hand it over only to them")
	return nil
}
