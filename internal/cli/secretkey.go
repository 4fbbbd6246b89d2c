package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/secretkey"
	"github.com/countersign/countersign/internal/store/postgres"
	"github.com/countersign/countersign/internal/store/sqlite"
)

// keyFileEnv names the server's secret key file (see internal/secretkey).
// There is no variable that holds the key itself: it would show in the
// environment of every process.
const keyFileEnv = "COUNTERSIGN_SECRET_KEY_FILE"

// keyFileHelp is the help of the --secret-key-file flags.
const keyFileHelp = "the server's secret key file, which wraps every key the store holds; default secret.key in the data directory, made on first start; required with PostgreSQL (" + keyFileEnv + ")"

// storeKey says where the secret key of a store is.
type storeKey struct {
	// path is the configured key file; "" for the default, secret.key in
	// the data directory (a PostgreSQL store has no default).
	path string
	// notice is told when a key file is made; nil: nobody.
	notice io.Writer
}

// keyOf returns the key file configuration of a command: the flag, else
// COUNTERSIGN_SECRET_KEY_FILE.
func keyOf(env *Env, flagValue string) storeKey {
	if flagValue == "" {
		flagValue = env.Getenv(keyFileEnv)
	}
	return storeKey{path: flagValue, notice: env.Stderr}
}

// file returns the key file of a SQLite store in dir.
func (k storeKey) file(dir string) string {
	if k.path != "" {
		return k.path
	}
	return filepath.Join(dir, secretkey.FileName)
}

// openSQLite opens the SQLite store in dir with its secret key. When the
// key file is missing it is made, and the store sealed with it: a new
// store, or one an earlier version wrote. A store already sealed is never
// given a new key: the file just made is removed again and the message
// says to restore the one that sealed it.
func openSQLite(ctx context.Context, dir string, k storeKey, extra ...sqlite.Option) (countersign.Store, error) {
	path := k.file(dir)
	key, err := secretkey.Load(path)
	existed, created := err == nil, false
	if secretkey.IsNotExist(err) {
		key, err = secretkey.Create(path)
		created = err == nil
		if errors.Is(err, fs.ErrExist) {
			// Another command made it meanwhile: that one is the key.
			key, err = secretkey.Load(path)
		}
	}
	if err != nil {
		return nil, err
	}
	opts := append([]sqlite.Option{sqlite.WithSecretKey(key)}, extra...)
	if existed && k.path == "" {
		// The data directory's own key file, made by an earlier start,
		// which sealed the store then: a store that lost its record of
		// the key is refused, not sealed over what was changed. A file
		// another command made meanwhile is not one: that command may
		// not have sealed the store yet.
		opts = append(opts, sqlite.WithKeyFileExisted())
	}
	db, err := sqlite.Open(ctx, filepath.Join(dir, "countersign.db"), opts...)
	switch {
	case err == nil:
	case created && errors.Is(err, countersign.ErrWrongSecretKey):
		os.Remove(path)
		return nil, fmt.Errorf("the store in %s is sealed with a secret key, but its key file %s is missing: restore that file from your backup (or set %s to where it is); a new key cannot open the store", dir, path, keyFileEnv)
	case errors.Is(err, sqlite.ErrKeyCheckGone):
		return nil, fmt.Errorf("the store in %s holds no record of the secret key it was sealed with, though its key file %s was there before: "+
			"someone with the database but not the key may have changed it (compare it with your backup); "+
			"if you restored a backup made before this version sealed the store, or a first start of this version stopped before it sealed it, move %s aside and run again", dir, path, path)
	case errors.Is(err, countersign.ErrWrongSecretKey):
		return nil, fmt.Errorf("the store in %s was sealed with another secret key than the one in %s: give it the key file it was sealed with (%s)", dir, path, keyFileEnv)
	default:
		return nil, fmt.Errorf("open the store in %s: %w", dir, err)
	}
	if created && k.notice != nil {
		fmt.Fprintf(k.notice, "countersign: made the secret key file %s (it wraps every key of the store). Back it up, kept apart from the data: a copy of the data without it opens nothing, and the data does not open without it.\n", path)
	}
	return db, nil
}

// openPostgres opens the PostgreSQL store at url with its secret key,
// which must be given: replicas share the store, so each must be given the
// same key file, and none may make one of its own.
func openPostgres(ctx context.Context, url string, k storeKey, log *slog.Logger) (countersign.Store, error) {
	if k.path == "" {
		return nil, fmt.Errorf("a PostgreSQL store needs the server's secret key file: set %s (or --secret-key-file) to it, the same file on every replica; make one with: countersign secret-key create FILE", keyFileEnv)
	}
	key, err := secretkey.Load(k.path)
	if secretkey.IsNotExist(err) {
		return nil, fmt.Errorf("the secret key file %s does not exist: make one with countersign secret-key create %s, and give every replica the same file", k.path, k.path)
	} else if err != nil {
		return nil, err
	}
	db, err := postgres.Open(ctx, url, log, postgres.WithSecretKey(key))
	if errors.Is(err, countersign.ErrWrongSecretKey) {
		return nil, fmt.Errorf("the PostgreSQL store at %s was sealed with another secret key than the one in %s: give every replica the key file it was sealed with", describeURL(url), k.path)
	} else if err != nil {
		return nil, fmt.Errorf("open the PostgreSQL store at %s: %w", describeURL(url), err)
	}
	return db, nil
}

// runSecretKey is "countersign secret-key create FILE": it makes a new key
// file, mode 0600, for a PostgreSQL store or a key kept away from the data.
func runSecretKey(ctx context.Context, env *Env, args []string) error {
	sub, args, err := subcommand(args, "create")
	if err != nil {
		return err
	}
	fs := newFlags(env, "secret-key "+sub)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("%w: countersign secret-key create FILE", ErrUsage)
	}
	if _, err := secretkey.Create(rest[0]); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "made the secret key file %s (mode 0600). Give it to the server with %s; back it up, kept apart from the data.\n", rest[0], keyFileEnv)
	return nil
}
