package cli

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/files"
)

// openFiles opens the store of file transfer (ADR 0008). On SQLite the
// bytes go to <data>/files/, emptied here, after openServeStore took the
// data directory's lock; on PostgreSQL, with no folder of this replica
// alone, they stay in memory. It warns when a few accounts could fill the
// space for everyone.
func openFiles(ctx context.Context, cfg *serveConfig, store countersign.Store, log *slog.Logger) (*files.Store, error) {
	fc := files.Config{TTL: cfg.filesTTL, MaxBytes: int64(cfg.filesMaxMB) << 20, Log: log.With("component", "files")}
	if cfg.dbURL == "" {
		fc.Dir = filepath.Join(cfg.data, "files")
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
