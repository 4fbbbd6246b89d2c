package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// runGrant lists and revokes the OAuth grants of an account on the data
// directory: what the inbox's Connections page does, for an operator.
// Revoking goes through identity.Admin to the store's revocation, so every
// server on the store refuses the grant's tokens at once.
func runGrant(ctx context.Context, env *Env, args []string) error {
	sub, args, err := subcommand(args, "list", "revoke")
	if err != nil {
		return err
	}
	fs := newFlags(env, "grant "+sub)
	where := storeFlags(env, fs)
	account := fs.String("account", "default", "account name")
	asJSON := fs.Bool("json", false, "print JSON (list)")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case sub == "list" && len(rest) > 0:
		return fmt.Errorf("%w: countersign grant list [--account A] [--json]", ErrUsage)
	case sub == "revoke" && len(rest) != 1:
		return fmt.Errorf("%w: countersign grant revoke [--account A] GRANT-ID", ErrUsage)
	}
	store, err := where.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	if sub == "revoke" {
		if err := (&identity.Admin{Store: store}).RevokeGrant(ctx, *account, rest[0]); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "revoked grant %s: its tokens no longer work and the browser its consent signed in is signed out\n", rest[0])
		return nil
	}
	acc, err := store.AccountByName(ctx, *account)
	if err != nil {
		return err
	}
	grants, err := store.Grants(ctx, acc.ID)
	if err != nil {
		return err
	}
	if *asJSON {
		out := []map[string]any{}
		for _, g := range grants {
			out = append(out, map[string]any{"id": g.ID, "client": g.ClientName, "client_id": g.ClientID, "approver": g.ApproverName,
				"tiers": g.Tiers, "created_at": g.CreatedAt, "last_used_at": timeOrNil(g.LastUsedAt), "revoked": g.Revoked()})
		}
		return json.NewEncoder(env.Stdout).Encode(out)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCLIENT\tAPPROVER\tTIERS\tCREATED\tLAST USED\tSTATE")
	for _, g := range grants {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.ID, g.ClientName, g.ApproverName, strings.Join(g.Tiers, ","),
			g.CreatedAt.Format(time.DateTime), orNever(g.LastUsedAt), grantState(g))
	}
	return tw.Flush()
}

func timeOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func orNever(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Format(time.DateTime)
}

func grantState(g *countersign.Grant) string {
	if g.Revoked() {
		return "revoked " + g.RevokedAt.Format(time.DateTime)
	}
	return "active"
}
