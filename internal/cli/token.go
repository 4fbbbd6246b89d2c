package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/countersign/countersign/internal/identity"
)

// runTokenChange is "token list" and "token revoke": an approver's API
// tokens, by id or name. A revoked token stops working at once.
func runTokenChange(ctx context.Context, env *Env, sub string, args []string) error {
	fs := newFlags(env, "token "+sub)
	where := storeFlags(env, fs)
	approver := fs.String("approver", "", "the approver's username")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *approver == "" || (sub == "list" && len(rest) != 0) || (sub == "revoke" && len(rest) != 1) {
		return fmt.Errorf("%w: countersign token list --approver U | token revoke --approver U ID-OR-NAME", ErrUsage)
	}
	store, err := where.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	if sub == "revoke" {
		if err := (&identity.Admin{Store: store}).RevokeApproverToken(ctx, *approver, rest[0]); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "revoked approver token %s of %s\n", rest[0], *approver)
		return nil
	}
	ap, err := store.ApproverByUsername(ctx, *approver)
	if err != nil {
		return err
	}
	tokens, err := store.ApproverTokens(ctx, ap.ID)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tTOKEN\tCREATED\tSTATE")
	for _, t := range tokens {
		state := "active"
		if t.Revoked() {
			state = "revoked " + t.RevokedAt.Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.ID, t.Hint, t.CreatedAt.Format(time.DateTime), state)
	}
	return tw.Flush()
}
