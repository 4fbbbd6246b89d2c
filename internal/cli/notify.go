package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/notify"
)

const notifyUsage = `usage:
  countersign notify add    [--account A] --name N --type webhook --url URL [--secret-file F | --secret-stdin]
  countersign notify add    [--account A] --name N --type email --smtp-host H [--smtp-port P] [--smtp-tls starttls|tls|none]
                            [--smtp-username U (--secret-file F | --secret-stdin)] --from ADDR --to ADDR[,ADDR…]
  countersign notify add    [--account A] --name N --type ntfy [--server URL] --topic T [--secret-file F | --secret-stdin]
                            (any type) [--approvers U[,U…]]
  countersign notify list   [--account A] [--json]
  countersign notify remove [--account A] NAME
  countersign notify status [--account A] [--json]
  countersign notify test   [--account A] [--public-url URL] NAME
  countersign notify apply  FILE.toml

The secret (the webhook's signing secret, the SMTP password, the ntfy access
token) comes from a file or standard input, never from the command line. A
webhook without one gets a generated secret, printed once.`

// notifyFlags are the flags of every notify subcommand.
type notifyFlags struct {
	data, account, name, typ, public string
	secretFile                       string
	secretStdin, asJSON              bool
	set                              notify.Settings
	to, approvers                    string
}

func runNotify(ctx context.Context, env *Env, args []string) error {
	sub, args, err := subcommand(args, "add", "list", "remove", "status", "test", "apply")
	if err != nil {
		return fmt.Errorf("%w\n%s", err, notifyUsage)
	}
	f := &notifyFlags{}
	fs := newFlags(env, "notify "+sub)
	fs.Usage = func() { fmt.Fprintln(env.Stderr, notifyUsage) }
	f.register(fs)
	where := storeFlagsFor(env, fs, &f.data)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	// Check the arguments before opening the store, which creates the data
	// directory: a mistyped command must change nothing.
	if err := f.check(sub, rest); err != nil {
		return err
	}
	store, err := where.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	admin := &notify.Admin{Store: store}
	switch sub {
	case "add":
		return notifyAdd(ctx, env, admin, f)
	case "list":
		return notifyList(ctx, env, admin, f)
	case "remove":
		if err := admin.Remove(ctx, f.account, rest[0]); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "removed channel %s of account %s with its queued notifications\n", rest[0], f.account)
		return nil
	case "status":
		return notifyStatus(ctx, env, admin, f)
	case "test":
		return notifyTest(ctx, env, admin, f, rest[0])
	}
	return notifyApply(ctx, env, admin, rest[0])
}

func (f *notifyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.data, "data", "", "data directory (COUNTERSIGN_DATA)")
	fs.StringVar(&f.account, "account", "default", "account name")
	fs.StringVar(&f.name, "name", "", "channel name (add)")
	fs.StringVar(&f.typ, "type", "", "channel type: webhook, email or ntfy (add)")
	fs.StringVar(&f.secretFile, "secret-file", "", "read the secret from this file (add)")
	fs.BoolVar(&f.secretStdin, "secret-stdin", false, "read the secret from standard input (add)")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON (list, status)")
	fs.StringVar(&f.public, "public-url", "", "URL where people reach the server, for the links of a test (COUNTERSIGN_PUBLIC_URL)")
	fs.StringVar(&f.set.URL, "url", "", "webhook: the URL to POST to")
	fs.StringVar(&f.set.SMTPHost, "smtp-host", "", "email: SMTP server host name")
	fs.IntVar(&f.set.SMTPPort, "smtp-port", 0, "email: SMTP port (default 587 for starttls, 465 for tls, 25 for none)")
	fs.StringVar(&f.set.SMTPTLS, "smtp-tls", "", "email: starttls (default), tls or none")
	fs.StringVar(&f.set.SMTPUsername, "smtp-username", "", "email: SMTP user name; the password is the secret")
	fs.StringVar(&f.set.From, "from", "", "email: sender address")
	fs.StringVar(&f.to, "to", "", "email: comma-separated recipient addresses")
	fs.StringVar(&f.set.Server, "server", "", "ntfy: server URL (default "+notify.DefaultNtfyServer+")")
	fs.StringVar(&f.set.Topic, "topic", "", "ntfy: topic")
	fs.StringVar(&f.approvers, "approvers", "", "any type: comma-separated usernames the channel tells; a request a team rule routes goes only to channels naming one of its approvers (default: the whole account)")
}

func (f *notifyFlags) check(sub string, rest []string) error {
	want := map[string]int{"add": 0, "list": 0, "status": 0, "remove": 1, "test": 1, "apply": 1}[sub]
	if len(rest) != want {
		return fmt.Errorf("%w: wrong number of arguments\n%s", ErrUsage, notifyUsage)
	}
	if sub == "add" && (f.name == "" || f.typ == "") {
		return fmt.Errorf("%w: notify add needs --name and --type\n%s", ErrUsage, notifyUsage)
	}
	if f.secretFile != "" && f.secretStdin {
		return fmt.Errorf("%w: give the secret with --secret-file or --secret-stdin, not both", ErrUsage)
	}
	return nil
}

// secret reads the secret of notify add from its file or standard input.
func (f *notifyFlags) secret(env *Env) (string, error) {
	switch {
	case f.secretFile != "":
		b, err := os.ReadFile(filepath.Clean(f.secretFile))
		if err != nil {
			return "", fmt.Errorf("read --secret-file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	case f.secretStdin:
		line, err := bufio.NewReader(env.Stdin).ReadString('\n')
		if err != nil && line == "" {
			return "", fmt.Errorf("read the secret from standard input: %w", err)
		}
		return strings.TrimRight(line, "\r\n"), nil
	}
	return "", nil
}

func notifyAdd(ctx context.Context, env *Env, admin *notify.Admin, f *notifyFlags) error {
	secret, err := f.secret(env)
	if err != nil {
		return err
	}
	generated := false
	if countersign.ChannelType(f.typ) == countersign.ChannelWebhook && secret == "" {
		secret, generated = countersign.NewSecret("whsec_"), true
	}
	if f.approvers != "" {
		f.set.Approvers = strings.Split(f.approvers, ",")
	}
	if f.to != "" {
		f.set.To = strings.Split(f.to, ",")
		for i := range f.set.To {
			f.set.To[i] = strings.TrimSpace(f.set.To[i])
		}
	}
	c, err := admin.Add(ctx, notify.Spec{Account: f.account, Name: f.name, Type: countersign.ChannelType(f.typ), Settings: f.set, Secret: secret})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "added %s channel %s (%s) to account %s: %s\n", c.Type, c.Name, c.ID, f.account, notify.Describe(c))
	if generated {
		fmt.Fprintf(env.Stdout, "\nThe webhook's signing secret (shown once; the %s header is sha256=HMAC-SHA256 of the body under it):\n\n  %s\n", notify.SignatureHeader, secret)
	}
	return nil
}

func notifyList(ctx context.Context, env *Env, admin *notify.Admin, f *notifyFlags) error {
	list, err := admin.List(ctx, f.account)
	if err != nil {
		return err
	}
	if f.asJSON {
		out := []map[string]any{}
		for _, c := range list {
			out = append(out, map[string]any{"id": c.ID, "name": c.Name, "type": c.Type, "settings": c.Config,
				"has_secret": len(c.Secret) > 0, "created_at": c.CreatedAt})
		}
		return json.NewEncoder(env.Stdout).Encode(out)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tDESTINATION\tCREATED")
	for _, c := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.Type, notify.Describe(c), c.CreatedAt.Format(time.DateTime))
	}
	return tw.Flush()
}

func notifyStatus(ctx context.Context, env *Env, admin *notify.Admin, f *notifyFlags) error {
	list, err := admin.Status(ctx, f.account)
	if err != nil {
		return err
	}
	if f.asJSON {
		out := []map[string]any{}
		for _, st := range list {
			out = append(out, map[string]any{
				"name": st.Channel.Name, "type": st.Channel.Type, "pending": st.Pending, "retrying": st.Retrying,
				"sent": st.Sent, "failed": st.Failed, "last_sent_at": jsonTime(st.LastSentAt),
				"next_attempt_at": jsonTime(st.NextAttemptAt), "last_error": st.LastError, "last_error_at": jsonTime(st.LastErrorAt),
			})
		}
		return json.NewEncoder(env.Stdout).Encode(out)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tPENDING\tRETRYING\tSENT\tFAILED\tLAST SENT\tLAST ERROR")
	for _, st := range list {
		lastErr := "-"
		if st.LastError != "" {
			// What a remote server answered, as it came: shown one
			// line, its hidden characters as escapes (oneLine).
			lastErr = st.LastErrorAt.Format(time.DateTime) + " " + oneLine(st.LastError, 500)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", st.Channel.Name, st.Channel.Type,
			st.Pending, st.Retrying, st.Sent, st.Failed, orDash(st.LastSentAt), lastErr)
	}
	return tw.Flush()
}

func notifyTest(ctx context.Context, env *Env, admin *notify.Admin, f *notifyFlags, name string) error {
	configured := f.public
	if configured == "" {
		configured = env.Getenv("COUNTERSIGN_PUBLIC_URL")
	}
	public, err := publicURL(configured, envOr(env, "COUNTERSIGN_ADDR", "127.0.0.1:8080"))
	if err != nil {
		return err
	}
	if err := admin.Test(ctx, f.account, name, &notify.Delivery{PublicURL: public}); err != nil {
		return fmt.Errorf("test message through %s: %w", name, err)
	}
	fmt.Fprintf(env.Stdout, "sent a test message through channel %s of account %s\n", name, f.account)
	return nil
}

func notifyApply(ctx context.Context, env *Env, admin *notify.Admin, path string) error {
	specs, err := notify.LoadFile(path)
	if err != nil {
		return err
	}
	created, updated, err := admin.Apply(ctx, specs)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "applied %s: %d channels created, %d updated\n", path, created, updated)
	return nil
}

func jsonTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func orDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.DateTime)
}

// applyNotifyConfig puts the channels of the configuration file into the
// store at the server's start. A bad file stops the start: a mistake there
// must not silently leave approvers unwarned.
func applyNotifyConfig(ctx context.Context, store countersign.Store, specs []notify.Spec, log *slog.Logger) error {
	if len(specs) == 0 {
		return nil
	}
	created, updated, err := (&notify.Admin{Store: store}).Apply(ctx, specs)
	if err != nil {
		return fmt.Errorf("notification config: %w", err)
	}
	log.Info("notification channels applied", "created", created, "updated", updated)
	return nil
}

// startNotifyWorker delivers the outbox in the background until the
// returned function is called; that function waits for the attempts under
// way to be recorded.
func startNotifyWorker(store countersign.Store, public *url.URL, log *slog.Logger) func() {
	w := notify.NewWorker(store, &notify.Delivery{PublicURL: public}, nil, log, notify.WorkerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
