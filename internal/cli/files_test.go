package cli

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
)

// TestFilesStartupWarning: the start warns when the accounts in the store
// could fill the space for files, and not before.
func TestFilesStartupWarning(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	admin := &identity.Admin{Store: store}
	cfg := &serveConfig{data: t.TempDir(), filesTTL: 30 * time.Minute}
	for n := 1; n <= 5; n++ {
		if _, err := admin.CreateAccount(ctx, fmt.Sprintf("acc%d", n)); err != nil {
			t.Fatal(err)
		}
		var buf testutil.LogBuffer
		if _, err := openFiles(ctx, cfg, store, "127.0.0.1:8080", slog.New(slog.NewTextHandler(&buf, nil))); err != nil {
			t.Fatal(err)
		}
		// 256 MiB on disk, 64 MiB a share: four accounts fill it.
		if warned := strings.Contains(buf.String(), "a few accounts can fill the space"); warned != (n > 4) {
			t.Errorf("%d accounts: warned %v\n%s", n, warned, buf.String())
		}
	}
	// With a database and an address of every interface, the replica URL
	// must be set.
	cfg.dbURL = "postgres://x"
	if _, err := openFiles(ctx, cfg, store, "0.0.0.0:8080", slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "COUNTERSIGN_REPLICA_URL") {
		t.Fatalf("unspecified address: %v", err)
	}
}
