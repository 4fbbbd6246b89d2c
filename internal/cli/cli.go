// Package cli holds the subcommands of the countersign binary. main only
// picks the role; each command parses its own flags, builds its
// dependencies and calls into the packages that do the work.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/countersign/countersign"
)

// Env is what a command sees of the process: arguments, streams and the
// environment, so that tests run commands in process.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// OSEnv is the environment of the running process.
func OSEnv() *Env {
	return &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

type command struct {
	summary string
	run     func(ctx context.Context, env *Env, args []string) error
}

func commands() map[string]command {
	return map[string]command{
		"serve":      {"run the server", runServe},
		"account":    {"create or list accounts (on the data directory)", runAccount},
		"key":        {"create, list or revoke agent keys (on the data directory)", runKey},
		"approver":   {"create approvers and set their roles (on the data directory)", runApprover},
		"token":      {"create approver API tokens (on the data directory)", runToken},
		"grant":      {"list or revoke the OAuth grants of remote MCP clients (on the data directory)", runGrant},
		"audit":      {"verify the audit log (on the data directory)", runAudit},
		"migrate":    {"apply the store's migrations and report its schema version", runMigrate},
		"store":      {"copy an instance to another store, such as SQLite to PostgreSQL", runStoreCmd},
		"secret-key": {"make a new secret key file (for PostgreSQL, or a key kept away from the data)", runSecretKey},
		"notify":     {"add, list, test or remove notification channels; delivery status (on the data directory)", runNotify},
		"list":       {"list requests, as an approver (through the API)", runList},
		"approve":    {"approve a request by its reference, as an approver", runApprove},
		"deny":       {"deny a request by its reference, as an approver", runDeny},
		"rm":         {"the rm wrapper: asks before a risky delete (also as a symlink named rm)", runRm},
		"hook":       {"the Claude Code hook: hook claude (PreToolUse, PermissionRequest), hook claude install", runHook},
		"mcp":        {"the MCP gateway over stdio: asks a human before commit and external tool calls", runMCP},
		"doctor":     {"check a set-up: server, public URL, notifications, rm wrapper, hook, MCP upstreams, file modes", runDoctor},
	}
}

// exitError ends a command with its own exit status; msg, when set, is
// printed first.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// ErrUsage marks an error in how a command was called: exit status 2.
var ErrUsage = errors.New("usage")

// Run runs the command named by args[0] and returns the exit status.
func Run(ctx context.Context, env *Env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(env.Stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "countersign: unknown command %q\n\n", args[0])
		usage(env.Stderr)
		return 2
	}
	err := cmd.run(ctx, env, args[1:])
	var exit exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if exit.msg != "" {
			fmt.Fprintf(env.Stderr, "countersign %s: %s\n", args[0], exit.msg)
		}
		return exit.code
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		fmt.Fprintf(env.Stderr, "countersign %s: %v\n", args[0], err)
		return 2
	}
	fmt.Fprintf(env.Stderr, "countersign %s: %s\n", args[0], message(err))
	return 1
}

// message is an error as a user should read it: the message of an
// application error, the text of any other.
func message(err error) string {
	var e *countersign.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: countersign <command> [flags]")
	fmt.Fprintln(w)
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'countersign <command> -h' for its flags.")
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(env *Env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("countersign "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	return fs
}

// parse parses flags, allowing them after positional arguments too
// ("approve K7F-2QX --reason x").
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", ErrUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		if args[0] == "--" {
			return append(positional, args[1:]...), nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// dataDir returns the data directory from the flag value, COUNTERSIGN_DATA
// or the default.
func dataDir(env *Env, flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if v := env.Getenv("COUNTERSIGN_DATA"); v != "" {
		return v
	}
	return "countersign-data"
}

// envOr returns the environment variable, or def when it is unset.
func envOr(env *Env, name, def string) string {
	if v := env.Getenv(name); v != "" {
		return v
	}
	return def
}

// secretFromEnv reads a secret from NAME, or from the file named by
// NAME_FILE.
func secretFromEnv(env *Env, name string) (string, error) {
	if v := env.Getenv(name); v != "" {
		return v, nil
	}
	if p := env.Getenv(name + "_FILE"); p != "" {
		b, err := os.ReadFile(filepath.Clean(p))
		if err != nil {
			return "", fmt.Errorf("read %s_FILE: %w", name, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", nil
}
