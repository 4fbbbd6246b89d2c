package server_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/metrics"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/store/sqlite"
)

// TestNewFailsOnStoreError checks that a store that cannot give the server
// its cookie keys is an error New returns, for its caller to report, and
// not a panic.
func TestNewFailsOnStoreError(t *testing.T) {
	t.Parallel()
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	store.Close()
	svc := approval.New(store, nil, approval.NewHub(), approval.Config{}, nil, nil)
	srv, err := server.New(server.Config{}, svc, &identity.Authenticator{Store: store}, metrics.NewRegistry(), nil)
	if err == nil || srv != nil {
		t.Fatalf("New on a closed store = %v, %v; want no server and an error", srv, err)
	}
	if !strings.Contains(err.Error(), "read the CSRF key") {
		t.Errorf("New's error = %q; want it to say which read failed", err)
	}
}
