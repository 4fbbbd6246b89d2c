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
	"sort"

	"github.com/countersign/countersign/internal/notify"
	"github.com/countersign/countersign/internal/secretkey"
	"github.com/countersign/countersign/internal/store/postgres"
	"github.com/countersign/countersign/internal/store/sqlite"
)

// checkDataDir: the data directory and the secret key file are closed to
// other users. It reads modes only: every command that opens the store
// would close them again, but doctor changes nothing.
func (d *doctor) checkDataDir() {
	const check = "data dir"
	u, err := d.where.url()
	if err != nil {
		d.add(statusFail, check, err.Error(), "")
		return
	}
	keyFile := keyOf(d.env, *d.where.keyFile)
	if u != "" {
		d.add(statusSkip, check, "the store is PostgreSQL ("+describeURL(u)+"): no data directory", "")
		d.storeSafe = d.checkKeyFile(keyFile.path, true)
		return
	}
	if _, err := os.Lstat(d.data); errors.Is(err, fs.ErrNotExist) {
		d.add(statusSkip, check, "no data directory at "+d.data+": run doctor beside the server, with --data or COUNTERSIGN_DATA", "")
		d.add(statusSkip, "secret key", "no data directory here", "")
		return
	}
	safe := d.checkDirModes()
	keyOK := d.checkKeyFile(keyFile.file(d.data), requireStore(d.data) == nil)
	d.storeSafe = safe && keyOK && requireStore(d.data) == nil
}

// checkDirModes reports the data directory's mode and its files'.
func (d *doctor) checkDirModes() bool {
	const check = "data dir"
	st, err := os.Stat(d.data)
	if err != nil {
		d.add(statusFail, check, err.Error(), "")
		return false
	}
	if !st.IsDir() {
		d.add(statusFail, check, d.data+" is not a directory", "set --data or COUNTERSIGN_DATA to the server's data directory")
		return false
	}
	fix := fmt.Sprintf("chmod 0700 %[1]s && chmod 0600 %[1]s/*, or start countersign serve, which closes it again", d.data)
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		d.add(statusFail, check, fmt.Sprintf("%s is %04o: other users may read or swap its files", d.data, perm), fix)
		return false
	}
	entries, err := os.ReadDir(d.data)
	if err != nil {
		d.add(statusFail, check, "read "+d.data+": "+err.Error(), "run doctor as the user the server runs as")
		return false
	}
	var open []string
	for _, e := range entries {
		fi, err := e.Info()
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
			open = append(open, fmt.Sprintf("%s (%04o)", e.Name(), fi.Mode().Perm()))
		}
	}
	if len(open) > 0 {
		sort.Strings(open)
		d.add(statusFail, check, fmt.Sprintf("%s is 0700, but files in it are open to other users: %v", d.data, open), fix)
		return false
	}
	d.add(statusOK, check, fmt.Sprintf("%s is %04o, its files closed to other users", d.data, st.Mode().Perm()), "")
	return true
}

// checkKeyFile reports the secret key file: present when the store is,
// readable by its owner only, and a key. The key itself is never shown.
func (d *doctor) checkKeyFile(path string, needed bool) bool {
	const check = "secret key"
	if path == "" {
		d.add(statusFail, check, "a PostgreSQL store needs the secret key file, and none is set",
			"set COUNTERSIGN_SECRET_KEY_FILE (or --secret-key-file) to the file every replica uses")
		return false
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !needed:
		d.add(statusSkip, check, path+" is not made yet: the first start makes it", "")
		return false
	case errors.Is(err, fs.ErrNotExist):
		d.add(statusFail, check, path+" is missing: the store does not open without it",
			"restore the key file from your backup (a new key cannot open this store)")
		return false
	case err != nil:
		d.add(statusFail, check, err.Error(), "run doctor as the user the server runs as")
		return false
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		d.add(statusFail, check, fmt.Sprintf("%s is %04o: other users may read the key", path, perm), "chmod 0600 "+path)
		return false
	}
	if _, err := secretkey.Load(path); err != nil {
		d.add(statusFail, check, err.Error(), "restore the key file from your backup")
		return false
	}
	d.add(statusOK, check, fmt.Sprintf("%s is %04o", path, st.Mode().Perm()), "")
	return true
}

// checkNotifications: channels are configured, and the last delivery of
// each worked. It reads the store, beside the server: no endpoint of the
// server tells it to anyone who asks. The store is opened only when its
// schema is this binary's (storeCurrent), so that opening it migrates
// nothing.
func (d *doctor) checkNotifications(ctx context.Context) {
	const check = "notifications"
	u, _ := d.where.url()
	if !d.storeSafe {
		why := "no store here to read: run doctor beside the server, with --data or --database-url"
		if u != "" || requireStore(d.data) == nil {
			why = "the store is not read until the checks above pass"
		}
		d.add(statusSkip, check, why, "")
		return
	}
	if !d.storeCurrent(ctx, check, u) {
		return
	}
	store, err := d.where.open(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		d.add(statusFail, check, "open the store: "+message(err), "")
		return
	}
	defer store.Close()
	accounts, err := store.Accounts(ctx)
	if err != nil {
		d.add(statusFail, check, "read the accounts: "+message(err), "")
		return
	}
	admin := &notify.Admin{Store: store}
	channels := 0
	for _, a := range accounts {
		list, err := admin.Status(ctx, a.Name)
		if err != nil {
			d.add(statusFail, check, "read the delivery status of account "+a.Name+": "+message(err), "")
			continue
		}
		for _, st := range list {
			channels++
			name := fmt.Sprintf("%s channel %s of account %s", st.Channel.Type, st.Channel.Name, a.Name)
			test := fmt.Sprintf("countersign notify test --account %s %s", a.Name, st.Channel.Name)
			switch {
			case !st.LastErrorAt.IsZero() && st.LastErrorAt.After(st.LastSentAt):
				// The error text is what a remote server answered, and may
				// name a URL with a token: notify status shows it.
				d.add(statusFail, check, fmt.Sprintf("%s: the last delivery failed, at %s (%d retrying, %d given up)",
					name, st.LastErrorAt.UTC().Format("2006-01-02 15:04:05 UTC"), st.Retrying, st.Failed),
					fmt.Sprintf("countersign notify status --account %s shows the error; correct the channel, then %s", a.Name, test))
			case st.LastSentAt.IsZero():
				d.add(statusWarn, check, name+": nothing delivered yet", "see it work: "+test)
			default:
				d.add(statusOK, check, fmt.Sprintf("%s: the last delivery worked, at %s", name, st.LastSentAt.UTC().Format("2006-01-02 15:04:05 UTC")), "")
			}
		}
	}
	if channels == 0 {
		d.add(statusWarn, check, "no channel: approvers learn of a request only in the inbox",
			"countersign notify add --name phone --type ntfy --topic TOPIC (or webhook, email; see countersign notify -h)")
	}
}

// storeCurrent reads the store's schema version without opening the store,
// and says whether it is this binary's. Opening a store applies the
// binary's migrations: a new binary's doctor, run before the server was
// restarted, would upgrade the schema under the old server. So a store
// at another version is left as it is, and the notifications are not
// checked.
func (d *doctor) storeCurrent(ctx context.Context, check, databaseURL string) bool {
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	var stored, known int
	var err error
	if databaseURL != "" {
		stored, err = postgres.StoredVersion(ctx, databaseURL)
		known = postgres.Latest()
	} else {
		stored, err = sqlite.StoredVersion(ctx, filepath.Join(d.data, "countersign.db"))
		known = sqlite.Latest()
	}
	switch {
	case err != nil:
		d.add(statusFail, check, d.where.describe()+": "+message(err), "")
	case stored == known:
		return true
	case stored == 0:
		d.add(statusWarn, check, "the store holds no schema yet: notifications not checked, as doctor changes nothing",
			"start countersign serve, which makes it; then run doctor again")
	case stored < known:
		d.add(statusWarn, check, fmt.Sprintf("the store is at schema %d, this binary's is %d: notifications not checked, as doctor changes nothing", stored, known),
			"start countersign serve of this version, which upgrades the store; then run doctor again")
	default:
		d.add(statusWarn, check, fmt.Sprintf("the store is at schema %d, newer than this binary's %d: notifications not checked", stored, known),
			"run the doctor of the countersign version that serves the store")
	}
	return false
}
