package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// subcommand splits "key create …" into "create" and the rest.
func subcommand(args []string, names ...string) (string, []string, error) {
	if len(args) == 0 {
		return "", nil, fmt.Errorf("%w: name one of: %s", ErrUsage, strings.Join(names, ", "))
	}
	for _, n := range names {
		if args[0] == n {
			return n, args[1:], nil
		}
	}
	return "", nil, fmt.Errorf("%w: unknown subcommand %q; name one of: %s", ErrUsage, args[0], strings.Join(names, ", "))
}

func runAccount(ctx context.Context, env *Env, args []string) error {
	sub, args, err := subcommand(args, "create", "list")
	if err != nil {
		return err
	}
	fs := newFlags(env, "account "+sub)
	where := storeFlags(env, fs)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	// Check the arguments before opening the store, which creates the data
	// directory: a mistyped command must change nothing.
	if sub == "create" && len(rest) != 1 {
		return fmt.Errorf("%w: countersign account create NAME", ErrUsage)
	} else if sub == "list" && len(rest) > 0 {
		return fmt.Errorf("%w: countersign account list takes no arguments", ErrUsage)
	}
	store, err := where.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	switch sub {
	case "create":
		acc, err := (&identity.Admin{Store: store}).CreateAccount(ctx, rest[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "created account %s (%s)\n", acc.Name, acc.ID)
	case "list":
		accounts, err := store.Accounts(ctx)
		if err != nil {
			return err
		}
		for _, a := range accounts {
			fmt.Fprintf(env.Stdout, "%s\t%s\n", a.Name, a.ID)
		}
	}
	return nil
}

func runKey(ctx context.Context, env *Env, args []string) error {
	sub, args, err := subcommand(args, "create", "list", "revoke")
	if err != nil {
		return err
	}
	fs := newFlags(env, "key "+sub)
	where := storeFlags(env, fs)
	account := fs.String("account", "default", "account name")
	name := fs.String("name", "", "key name (create)")
	asJSON := fs.Bool("json", false, "print JSON (create, list)")
	seedHMAC := fs.Bool("seed-hmac", false, "create: designate the key for the seed-compatible routes, whose clients sign with it (X-SafeRM-Signature, X-Claude-Signature)")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	// Check the arguments before opening the store, which creates the data
	// directory: a mistyped command must change nothing.
	switch {
	case sub == "create" && (*name == "" || len(rest) > 0):
		return fmt.Errorf("%w: countersign key create --account A --name N [--json]", ErrUsage)
	case sub == "list" && len(rest) > 0:
		return fmt.Errorf("%w: countersign key list [--account A] [--json]", ErrUsage)
	case sub == "revoke" && len(rest) != 1:
		return fmt.Errorf("%w: countersign key revoke [--account A] NAME-OR-ID", ErrUsage)
	}
	store, err := where.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	admin := &identity.Admin{Store: store}
	switch sub {
	case "create":
		create := admin.CreateAgentKey
		if *seedHMAC {
			create = admin.CreateSeedKey
		}
		k, secret, err := create(ctx, *account, *name)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(env.Stdout).Encode(map[string]string{"id": k.ID, "key": secret})
		}
		fmt.Fprintf(env.Stdout, "created agent key %s (%s) in account %s:\n\n  %s\n\nIt is shown once and stored only as a hash.\n", k.Name, k.ID, *account, secret)
	case "list":
		acc, err := store.AccountByName(ctx, *account)
		if err != nil {
			return err
		}
		keys, err := store.AgentKeys(ctx, acc.ID)
		if err != nil {
			return err
		}
		if *asJSON {
			out := []map[string]any{}
			for _, k := range keys {
				out = append(out, map[string]any{"id": k.ID, "name": k.Name, "hint": k.Hint, "created_at": k.CreatedAt, "revoked": k.Revoked()})
			}
			return json.NewEncoder(env.Stdout).Encode(out)
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tID\tKEY\tCREATED\tSTATE")
		for _, k := range keys {
			state := "active"
			if k.Revoked() {
				state = "revoked " + k.RevokedAt.Format(time.DateTime)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.Name, k.ID, k.Hint, k.CreatedAt.Format(time.DateTime), state)
		}
		return tw.Flush()
	case "revoke":
		g, err := admin.RevokeAgentKey(ctx, *account, rest[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "revoked agent key %s\n", rest[0])
		if g != nil {
			fmt.Fprintf(env.Stdout, "revoked its grant %s: its tokens no longer work and the browser its consent signed in is signed out\n", g.ID)
		}
	}
	return nil
}

func runApprover(ctx context.Context, env *Env, args []string) error {
	sub, args, err := subcommand(args, "create", "passwd", "remove", "passkeys", "enrol", "role", "list")
	if err != nil {
		return err
	}
	switch sub {
	case "role":
		return runApproverRole(ctx, env, args)
	case "list":
		return runApproverList(ctx, env, args)
	case "passkeys":
		return runApproverPasskeys(ctx, env, args)
	case "enrol":
		return runApproverEnrol(ctx, env, args)
	}
	if sub != "create" {
		return runApproverChange(ctx, env, sub, args)
	}
	fs := newFlags(env, "approver "+sub)
	where := storeFlags(env, fs)
	account := fs.String("account", "default", "account name")
	username := fs.String("username", "", "the approver's username")
	stdin := fs.Bool("password-stdin", false, "read the password from standard input instead of generating one")
	roleName := fs.String("role", string(countersign.RoleApprover), "the approver's role in the account: viewer (sees the inbox), approver (decides) or admin (decides and manages the account)")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *username == "" || len(rest) > 0 {
		return fmt.Errorf("%w: countersign approver create --account A --username U [--role viewer|approver|admin] [--password-stdin]", ErrUsage)
	}
	role, err := countersign.ParseRole(*roleName)
	if err != nil {
		return err
	}
	store, err := where.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	var password string
	generated := false
	if *stdin {
		if password, err = readPasswordLine(env.Stdin); err != nil {
			return err
		}
	} else if _, err := store.ApproverByUsername(ctx, *username); countersign.ErrorCode(err) == countersign.ENOTFOUND {
		password, generated = identity.NewPassword(), true
	}
	ap, err := (&identity.Admin{Store: store}).CreateApprover(ctx, *account, *username, password, role)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "approver %s (%s) is a member of account %s\n", ap.Username, ap.ID, *account)
	if generated {
		fmt.Fprintf(env.Stdout, "password (shown once): %s\n", password)
	}
	return nil
}

func runToken(ctx context.Context, env *Env, args []string) error {
	sub, args, err := subcommand(args, "create", "list", "revoke")
	if err != nil {
		return err
	}
	if sub != "create" {
		return runTokenChange(ctx, env, sub, args)
	}
	fs := newFlags(env, "token "+sub)
	where := storeFlags(env, fs)
	approver := fs.String("approver", "", "the approver's username")
	account := fs.String("account", "", "account the token acts for (needed when the approver belongs to several)")
	name := fs.String("name", "cli", "token name")
	asJSON := fs.Bool("json", false, "print JSON")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *approver == "" || len(rest) > 0 {
		return fmt.Errorf("%w: countersign token create --approver U [--account A] [--json]", ErrUsage)
	}
	store, err := where.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	t, secret, err := (&identity.Admin{Store: store}).CreateApproverToken(ctx, *approver, *account, *name)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(env.Stdout).Encode(map[string]string{"id": t.ID, "token": secret})
	}
	fmt.Fprintf(env.Stdout, "created approver token %s for %s:\n\n  %s\n\nIt is shown once and stored only as a hash.\n", t.ID, *approver, secret)
	return nil
}

func runAudit(ctx context.Context, env *Env, args []string) error {
	sub, args, err := subcommand(args, "verify")
	if err != nil {
		return err
	}
	fs := newFlags(env, "audit "+sub)
	where := storeFlags(env, fs)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	// A store made here would verify as intact: there must be one.
	if err := where.mustExist(); err != nil {
		return err
	}
	store, err := where.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	v, seq, hash, err := verifyAudit(ctx, store)
	if err != nil {
		return err
	}
	problems := v.Problems
	if len(problems) == 0 {
		fmt.Fprintf(env.Stdout, "audit log intact: %d entries, head %d %s\n%s\n", v.Count, seq, hash, keyedLine(v))
		return nil
	}
	for _, p := range problems {
		fmt.Fprintf(env.Stdout, "entry %d: %s\n", p.Seq, p.Problem)
	}
	fmt.Fprintln(env.Stdout, keyedLine(v))
	return fmt.Errorf("the audit log was changed: %d problems", len(problems))
}

// keyedLine says what the verifier checked: MACs under the secret key,
// which nobody without the key can make for a rewritten chain, or bare
// hashes, which anyone can.
func keyedLine(v *countersign.AuditVerifier) string {
	keyed, from := v.Keyed()
	switch {
	case !keyed:
		return "the chain is not keyed: its hashes show a changed entry, but a rewrite of the whole chain would go unseen"
	case from <= 1:
		return "the chain is keyed with the secret key (an HMAC per entry): rewriting it needs the key file"
	}
	return fmt.Sprintf("the chain is keyed with the secret key (an HMAC per entry) from entry %d on, where this store was sealed; the entries before it are hashed and linked to the keyed ones: rewriting any of them needs the key file", from)
}

// verifyAudit checks the whole audit log of a store against its recorded
// head, page by page, and returns the verifier (with its problems) and the
// head it compared with.
func verifyAudit(ctx context.Context, store countersign.Store) (*countersign.AuditVerifier, int64, string, error) {
	// Read the head first: entries written after it are checked too, but
	// the comparison is with the head as it was.
	seq, hash, err := store.AuditHead(ctx)
	if err != nil {
		return nil, 0, "", err
	}
	v := countersign.NewAuditVerifier()
	if k, ok := store.(countersign.KeyedAuditor); ok && k.SecretKey() != nil {
		v = countersign.NewKeyedAuditVerifier(k.SecretKey(), k.AuditKeyedFrom())
	}
	var after int64
	for done := false; !done; {
		page, err := store.AuditLog(ctx, after, 1000)
		if err != nil {
			return nil, 0, "", err
		}
		done = len(page) < 1000
		for _, e := range page {
			if e.Seq > seq {
				done = true
				break
			}
			v.Add(e)
			after = e.Seq
		}
	}
	v.Finish(seq, hash)
	return v, seq, hash, nil
}

// readPasswordLine reads a password, the first line of r: at most a few
// KiB are read, so that a stream with no line break ends.
func readPasswordLine(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4<<10)).ReadString('\n')
	if err != nil && line == "" {
		return "", fmt.Errorf("read the password from standard input: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}
