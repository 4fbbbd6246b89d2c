package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/datadir"
)

// runStoreCmd is "countersign store copy --from A --to B": it moves an
// instance between stores, such as from the SQLite data directory to a
// PostgreSQL database for several replicas.
func runStoreCmd(ctx context.Context, env *Env, args []string) error {
	sub, args, err := subcommand(args, "copy")
	if err != nil {
		return err
	}
	fs := newFlags(env, "store "+sub)
	from := fs.String("from", "", "the store to copy: a data directory or a postgres:// URL")
	to := fs.String("to", "", "the new, empty store to copy into: a data directory or a postgres:// URL")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *from == "" || *to == "" || len(rest) > 0 {
		return fmt.Errorf("%w: countersign store copy --from DIR-OR-URL --to DIR-OR-URL", ErrUsage)
	}
	if *from == *to {
		return fmt.Errorf("%w: --from and --to name the same store", ErrUsage)
	}
	return copyStore(ctx, env, *from, *to)
}

// copyStore copies everything of the store at from into the empty store at
// to, in one transaction on the target, then verifies the copy's audit log
// against the source's head.
func copyStore(ctx context.Context, env *Env, from, to string) error {
	log := warnLog(env)
	src, err := openLocation(ctx, from, true, log)
	if err != nil {
		return err
	}
	defer src.Close()
	if !isDatabaseURL(to) {
		// A server started on the target during the copy would write
		// into it (a first start): the target is held as a server
		// holds it, and one running there refuses the copy.
		if err := datadir.Prepare(to, log); err != nil {
			return err
		}
		release, err := lockData(to)
		if err != nil {
			return err
		}
		defer release()
	}
	dst, err := openLocation(ctx, to, false, log)
	if err != nil {
		return err
	}
	defer dst.Close()
	exp, ok := src.(countersign.Exporter)
	if !ok {
		return fmt.Errorf("%s cannot be copied from", describeLocation(from))
	}
	imp, ok := dst.(countersign.Importer)
	if !ok {
		return fmt.Errorf("%s cannot be copied into", describeLocation(to))
	}

	var counts copyCounts
	var head countersign.AuditHead
	err = imp.Import(ctx, func(put func(countersign.Record) error) error {
		// The target may run this again after a lost connection: count
		// afresh.
		counts, head = copyCounts{}, countersign.AuditHead{}
		return exp.Export(ctx, func(rec countersign.Record) error {
			counts.add(rec)
			if rec.AuditHead != nil {
				head = *rec.AuditHead
			}
			return put(rec)
		})
	})
	if err != nil {
		return fmt.Errorf("copy %s to %s: %w", describeLocation(from), describeLocation(to), err)
	}
	fmt.Fprintf(env.Stdout, "copied %s to %s:\n  %s\n", describeLocation(from), describeLocation(to), counts)

	// The copy must verify as the source did: the same chain, the same
	// head.
	v, seq, hash, err := verifyAudit(ctx, dst)
	if err != nil {
		return err
	}
	if len(v.Problems) > 0 || seq != head.Seq || hash != head.Hash {
		for _, p := range v.Problems {
			fmt.Fprintf(env.Stdout, "entry %d: %s\n", p.Seq, p.Problem)
		}
		return fmt.Errorf("the copy's audit log does not verify (head %d, the source's %d)", seq, head.Seq)
	}
	fmt.Fprintf(env.Stdout, "audit log intact on the copy: %d entries, head %d %s\n", v.Count, seq, hash)
	return nil
}

// copyCounts counts the records of a copy by kind.
type copyCounts struct {
	accounts, approvers, memberships, keys, tokens, requests, links, windows,
	sessions, channels, outbox, serverKeys, audit int
}

func (c *copyCounts) add(r countersign.Record) {
	switch {
	case r.Account != nil:
		c.accounts++
	case r.Approver != nil:
		c.approvers++
	case r.Membership != nil:
		c.memberships++
	case r.AgentKey != nil:
		c.keys++
	case r.ApproverToken != nil:
		c.tokens++
	case r.Request != nil:
		c.requests++
	case r.Link != nil:
		c.links++
	case r.Window != nil:
		c.windows++
	case r.Session != nil:
		c.sessions++
	case r.Channel != nil:
		c.channels++
	case r.OutboxItem != nil:
		c.outbox++
	case r.ServerKey != nil:
		c.serverKeys++
	case r.AuditEntry != nil:
		c.audit++
	}
}

func (c copyCounts) String() string {
	parts := []string{}
	for _, p := range []struct {
		n    int
		what string
	}{
		{c.accounts, "accounts"}, {c.approvers, "approvers"}, {c.memberships, "memberships"}, {c.keys, "agent keys"},
		{c.tokens, "approver tokens"}, {c.requests, "requests"}, {c.links, "links"}, {c.windows, "auto-approve windows"},
		{c.sessions, "sessions"}, {c.channels, "notification channels"}, {c.outbox, "outbox items"},
		{c.serverKeys, "server keys"}, {c.audit, "audit entries"},
	} {
		parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
	}
	return strings.Join(parts, ", ")
}
