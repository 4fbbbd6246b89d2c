package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/datadir"
	"github.com/countersign/countersign/internal/secretkey"
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
	keyFile := fs.String("secret-key-file", "", "the secret key file of both stores; default the one beside the source's data, copied beside the target's ("+keyFileEnv+")")
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
	return copyStore(ctx, env, *from, *to, keyOf(env, *keyFile))
}

// copyStore copies everything of the store at from into the empty store at
// to, in one transaction on the target, then verifies the copy's audit log
// against the source's head. The server keys stay wrapped with the secret
// key, so the target opens with the same key file: the one k names, or by
// default the source's, copied beside the target's data (a PostgreSQL
// target uses the source's file where it is).
func copyStore(ctx context.Context, env *Env, from, to string, k storeKey) error {
	log := warnLog(env)
	src, err := openLocation(ctx, from, k, true, log)
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
	dstKey, err := copyKeyFile(env, from, to, k)
	if err != nil {
		return err
	}
	dst, err := openLocation(ctx, to, dstKey, false, log)
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

// copyKeyFile returns the key of the copy's target. With no key file
// configured, the source's is beside its data: a target data directory
// gets a copy of it beside its own, a PostgreSQL target is opened with it
// where it is.
func copyKeyFile(env *Env, from, to string, k storeKey) (storeKey, error) {
	if k.path != "" || isDatabaseURL(from) {
		return k, nil
	}
	srcFile := k.file(from)
	if isDatabaseURL(to) {
		fmt.Fprintf(env.Stderr, "countersign: the copy is sealed with the key file %s: give it to every replica (%s), kept apart from the data\n", srcFile, keyFileEnv)
		return storeKey{path: srcFile, notice: k.notice}, nil
	}
	dstFile := k.file(to)
	if _, err := os.Lstat(dstFile); err == nil {
		return k, nil // the target's own: the open checks that it is the same key
	}
	if err := secretkey.Copy(srcFile, dstFile); err != nil {
		return k, err
	}
	return k, nil
}

// copyCounts counts the records of a copy by kind.
type copyCounts struct {
	accounts, approvers, memberships, keys, tokens, passkeys, requests, links, windows,
	coverages, sessions, channels, outbox, serverKeys, audit, oauthClients, grants, oauthTokens int
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
	case r.Passkey != nil:
		c.passkeys++
	case r.OAuthClient != nil:
		c.oauthClients++
	case r.Grant != nil:
		c.grants++
	case r.OAuthToken != nil:
		c.oauthTokens++
	case r.Request != nil:
		c.requests++
	case r.Link != nil:
		c.links++
	case r.Window != nil:
		c.windows++
	case r.Coverage != nil:
		c.coverages++
	case r.Session != nil:
		c.sessions++
	case r.Channel != nil:
		c.channels++
	case r.OutboxItem != nil:
		c.outbox++
	case r.ServerKey != nil:
		c.serverKeys++
	case r.KeyCheck != nil:
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
		{c.tokens, "approver tokens"}, {c.passkeys, "passkeys"}, {c.oauthClients, "OAuth clients"}, {c.grants, "grants"},
		{c.oauthTokens, "OAuth tokens"}, {c.requests, "requests"}, {c.links, "links"}, {c.windows, "auto-approve windows"},
		{c.coverages, "coverages"},
		{c.sessions, "sessions"}, {c.channels, "notification channels"}, {c.outbox, "outbox items"},
		{c.serverKeys, "server keys"}, {c.audit, "audit entries"},
	} {
		parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
	}
	return strings.Join(parts, ", ")
}
