package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/storetest"
)

// sealedDB is a new SQLite file for the sealing tests.
func sealedDB(t *testing.T) storetest.SealedDB {
	path := filepath.Join(t.TempDir(), "countersign.db")
	return storetest.SealedDB{
		Open: func(key *countersign.SecretKey) (countersign.Store, error) {
			var opts []Option
			if key != nil {
				opts = append(opts, WithSecretKey(key))
			}
			db, err := Open(t.Context(), path, opts...)
			if err == nil {
				t.Cleanup(func() { db.Close() })
			}
			return db, err
		},
		Exec: func(query string) { exec(t, rawDB(t, path), query) },
		Bytes: func(query string) []byte {
			var b []byte
			if err := rawDB(t, path).QueryRowContext(t.Context(), query).Scan(&b); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
			return b
		},
	}
}

func TestSealing(t *testing.T) { storetest.RunSealing(t, sealedDB) }

// TestConformanceSealed runs the conformance suite on a store opened with a
// secret key: wrapped server keys and the keyed chain behave alike.
func TestConformanceSealed(t *testing.T) {
	storetest.Run(t, func(t *testing.T) countersign.Store {
		db, err := Open(t.Context(), filepath.Join(t.TempDir(), "countersign.db"), WithSecretKey(storetest.NewSecretKey(t)))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	})
}
