package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/datadir"
	"github.com/countersign/countersign/internal/store/sqlite"
)

// openStore opens the SQLite store of the data directory, creating it on
// first use, with the secret key file beside it (secret.key), which it
// makes on first use.
func openStore(ctx context.Context, dir string, log *slog.Logger) (countersign.Store, error) {
	return openStoreKey(ctx, dir, storeKey{}, log)
}

// openStoreKey opens the SQLite store of the data directory, creating it
// on first use, with the secret key k names (see openSQLite). Every
// command that opens a data directory comes through here: the directory is
// tightened, or refused, first (datadir.Prepare), each change said in log.
// log also hears when the store cannot write (a full disk) and when it
// can again; opts are added to the store's options.
func openStoreKey(ctx context.Context, dir string, k storeKey, log *slog.Logger, opts ...sqlite.Option) (countersign.Store, error) {
	if err := datadir.Prepare(dir, log); err != nil {
		return nil, err
	}
	return openSQLite(ctx, dir, k, append([]sqlite.Option{sqlite.WithLog(log)}, opts...)...)
}

// openDatabase opens the PostgreSQL store at url, migrating it, with the
// secret key k names, which must be given. log receives the notification
// listener's reconnections; nil discards.
func openDatabase(ctx context.Context, url string, k storeKey, log *slog.Logger) (countersign.Store, error) {
	return openPostgres(ctx, url, k, log)
}

// storeLocation is where a command's store is: the flags --data and
// --database-url, with their environment variables. Every command that
// works on the store registers them through storeFlags, so that all of
// them pick the backend alike.
type storeLocation struct {
	env         *Env
	data        *string
	databaseURL *string
	keyFile     *string
}

// storeFlags registers --data and --database-url on fs.
func storeFlags(env *Env, fs *flag.FlagSet) *storeLocation {
	return storeFlagsFor(env, fs, fs.String("data", "", "data directory of the SQLite store (COUNTERSIGN_DATA)"))
}

// storeFlagsFor registers --database-url on fs, for a command that
// registers --data itself into data.
func storeFlagsFor(env *Env, fs *flag.FlagSet, data *string) *storeLocation {
	return &storeLocation{
		env:  env,
		data: data,
		databaseURL: fs.String("database-url", "",
			"PostgreSQL store, such as postgres://user@host/db; wins over the data directory (COUNTERSIGN_DATABASE_URL, COUNTERSIGN_DATABASE_URL_FILE)"),
		keyFile: fs.String("secret-key-file", "", keyFileHelp),
	}
}

// url returns the database URL from the flag or the environment, "" for
// the data directory.
func (l *storeLocation) url() (string, error) {
	return databaseURL(l.env, *l.databaseURL)
}

// open opens the store: PostgreSQL when a database URL is set, else SQLite
// in the data directory. log receives the listener's reconnections and
// the changes made to the data directory; nil: the changes go to stderr.
func (l *storeLocation) open(ctx context.Context, log *slog.Logger) (countersign.Store, error) {
	u, err := l.url()
	if err != nil {
		return nil, err
	}
	k := keyOf(l.env, *l.keyFile)
	if u != "" {
		return openDatabase(ctx, u, k, log)
	}
	if log == nil {
		log = warnLog(l.env)
	}
	return openStoreKey(ctx, dataDir(l.env, *l.data), k, log)
}

// warnLog is the log of an administration command: its warnings, such as
// a data directory made 0700, on stderr.
func warnLog(env *Env) *slog.Logger {
	return slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// mustExist refuses a data directory that holds no store, where open
// would make an empty one (a mistyped --data, say).
func (l *storeLocation) mustExist() error {
	if u, err := l.url(); err != nil || u != "" {
		return err
	}
	if err := requireStore(dataDir(l.env, *l.data)); err != nil {
		return fmt.Errorf("%w; set --data or COUNTERSIGN_DATA", err)
	}
	return nil
}

// requireStore refuses a data directory that holds no store.
func requireStore(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "countersign.db")); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s holds no countersign store (no countersign.db)", dir)
	} else if err != nil {
		return err
	}
	return nil
}

// describe names the store for a message, without any secret of the URL.
func (l *storeLocation) describe() string {
	if u, err := l.url(); err == nil && u != "" {
		return "PostgreSQL " + describeURL(u)
	}
	return "SQLite " + filepath.Join(dataDir(l.env, *l.data), "countersign.db")
}

// databaseURL returns the database URL from the flag value, else from
// COUNTERSIGN_DATABASE_URL or the file COUNTERSIGN_DATABASE_URL_FILE names
// (the URL may hold a password); "" when none is set.
func databaseURL(env *Env, flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	return secretFromEnv(env, "COUNTERSIGN_DATABASE_URL")
}

// isDatabaseURL reports whether a location is a PostgreSQL URL rather than
// a data directory.
func isDatabaseURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// openLocation opens a store named by a data directory or a PostgreSQL
// URL, with the secret key k names. mustExist refuses a data directory
// without a store, which opening would create. log receives the changes
// made to the data directory.
func openLocation(ctx context.Context, loc string, k storeKey, mustExist bool, log *slog.Logger) (countersign.Store, error) {
	if isDatabaseURL(loc) {
		return openDatabase(ctx, loc, k, nil)
	}
	if mustExist {
		if err := requireStore(loc); err != nil {
			return nil, err
		}
	}
	return openStoreKey(ctx, loc, k, log)
}

// describeLocation names a location for a message, without secrets.
func describeLocation(loc string) string {
	if isDatabaseURL(loc) {
		return "PostgreSQL " + describeURL(loc)
	}
	return "SQLite " + filepath.Join(loc, "countersign.db")
}

// describeURL shows a database URL as host/database only: the user, the
// password and the parameters stay out of messages and logs.
func describeURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "(the configured database)"
	}
	return u.Host + u.Path
}

// openServeStore opens the store of countersign serve: PostgreSQL when a
// database URL is set, else SQLite in the data directory, which the server
// then holds alone (lockData) until it calls closeStore. Either opens with
// the secret key k names. It returns the store and a name for the log,
// without any secret. opts are the SQLite store's.
func openServeStore(ctx context.Context, dir, databaseURL string, k storeKey, log *slog.Logger, opts ...sqlite.Option) (store countersign.Store, name string, closeStore func(), err error) {
	if databaseURL != "" {
		s, err := openDatabase(ctx, databaseURL, k, log)
		if err != nil {
			return nil, "", nil, err
		}
		return s, "postgres " + describeURL(databaseURL), func() { s.Close() }, nil
	}
	// Tightened before the lock is taken: the lock file is opened there,
	// and in a directory open to others it could be another user's link.
	if err := datadir.Prepare(dir, log); err != nil {
		return nil, "", nil, err
	}
	release, err := lockData(dir)
	if err != nil {
		return nil, "", nil, err
	}
	s, err := openStoreKey(ctx, dir, k, log, opts...)
	if err != nil {
		release()
		return nil, "", nil, err
	}
	return s, "sqlite " + filepath.Join(dir, "countersign.db"), func() { s.Close(); release() }, nil
}

// followReplicas, when the store is shared with other replicas (it has a
// change feed), feeds the service's hub from it until the returned stop is
// called, so that a decision made on another replica wakes the agents
// waiting on this one.
func followReplicas(svc *approval.Service, store countersign.Store, log *slog.Logger) (stop func()) {
	feed, ok := store.(countersign.ChangeFeed)
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := svc.FollowReplicas(ctx, feed); err != nil {
			log.Error("follow the changes of other replicas", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
