package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/files"
)

// openFiles opens the store of file transfer (ADR 0008). On SQLite the
// bytes go to <data>/files/, emptied here, after openServeStore took the
// data directory's lock; on PostgreSQL, with no folder of this replica
// alone, they stay in memory. It warns when a few accounts could fill the
// space for everyone.
func openFiles(ctx context.Context, cfg *serveConfig, store countersign.Store, listening string, log *slog.Logger) (*files.Store, error) {
	fc := files.Config{TTL: cfg.filesTTL, MaxBytes: int64(cfg.filesMaxMB) << 20, Log: log.With("component", "files"), Audit: store}
	if cfg.dbURL == "" {
		fc.Dir = filepath.Join(cfg.data, "files")
	} else {
		// Replicas: each record's id names the replica that holds it
		// (files.Locator), under a key they share through the database.
		key, err := store.ServerKey(ctx, "files-replica", 32)
		if err != nil {
			return nil, fmt.Errorf("read the files replica key: %w", err)
		}
		self := cfg.replicaURL
		if self == "" {
			if host, _, _ := net.SplitHostPort(listening); net.ParseIP(host).IsUnspecified() {
				return nil, fmt.Errorf("%w: with a database URL and the address %s, set COUNTERSIGN_REPLICA_URL (or --replica-url) to the URL where other replicas reach this one, such as http://10.0.0.5:8080", ErrUsage, listening)
			}
			self = "http://" + listening
		}
		if fc.Locator, err = files.NewLocator(key, strings.TrimRight(self, "/")); err != nil {
			return nil, err
		}
	}
	fs, err := files.Open(fc)
	if err != nil {
		return nil, err
	}
	accounts, err := store.Accounts(ctx)
	if err != nil {
		return nil, err
	}
	if n := fs.Crowding(); int64(len(accounts)) > n {
		log.Warn("a few accounts can fill the space for files: each may take a share, and this many together fill it until their files expire; raise COUNTERSIGN_FILES_MAX_MB to give the others room",
			"accounts_that_fill_it", n, "accounts", len(accounts), "space_mib", fs.MaxBytes()>>20, "share_mib", fs.PerAccount()>>20)
	}
	return fs, nil
}
