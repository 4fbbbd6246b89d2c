package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/sqlite"
)

// openStore opens the store of the data directory, creating it on first
// use.
func openStore(ctx context.Context, dir string) (countersign.Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the data directory: %w", err)
	}
	db, err := sqlite.Open(ctx, filepath.Join(dir, "countersign.db"))
	if err != nil {
		return nil, fmt.Errorf("open the store in %s: %w", dir, err)
	}
	return db, nil
}
