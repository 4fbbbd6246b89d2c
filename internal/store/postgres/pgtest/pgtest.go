// Package pgtest gives tests a PostgreSQL of their own: a fresh schema (or
// database) on the server named by COUNTERSIGN_TEST_POSTGRES, dropped when
// the test ends, or one of a Pool's schemas, migrated once and reset after
// each test. When the server cannot be reached the test is skipped with a
// message, unless COUNTERSIGN_TEST_STRICT=1 (CI), where it fails.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is the server the tests use when COUNTERSIGN_TEST_POSTGRES is
// not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// BaseURL returns the URL of the test server's database.
func BaseURL() string {
	if v := os.Getenv("COUNTERSIGN_TEST_POSTGRES"); v != "" {
		return v
	}
	return DefaultURL
}

var (
	reachOnce sync.Once
	reachErr  error
)

// require skips or fails t when the server cannot be reached; it tries
// once per test binary.
func require(t testing.TB) {
	t.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, BaseURL())
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		reachErr = err
	})
	if reachErr == nil {
		return
	}
	msg := fmt.Sprintf("PostgreSQL is unreachable at %s (set COUNTERSIGN_TEST_POSTGRES): %v", redact(BaseURL()), reachErr)
	if os.Getenv("COUNTERSIGN_TEST_STRICT") == "1" {
		t.Fatalf("%s; COUNTERSIGN_TEST_STRICT=1 forbids skipping", msg)
	}
	t.Skip(msg)
}

// redact hides a password in a URL.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Exec runs statements on the test server's database, outside any test
// schema.
func Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ExecURL(t, BaseURL(), sql, args...)
}

// ExecURL runs statements on the database (and schema) of url, such as
// one SchemaURL returned.
func ExecURL(t testing.TB, url, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// name returns a fresh identifier with the prefix.
func name(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// SchemaURL creates an empty schema, returns the server's URL with that
// schema as its search_path (see schemaURL), and drops the schema when t
// ends. It skips or fails t when the server is unreachable. Stores opened
// on the URL must be closed before the test ends (register their cleanup
// after this call).
func SchemaURL(t testing.TB) string {
	t.Helper()
	require(t)
	schema := name("cs_test_")
	Exec(t, "CREATE SCHEMA "+schema)
	t.Cleanup(func() { Exec(t, "DROP SCHEMA "+schema+" CASCADE") })
	return schemaURL(schema)
}

// schemaURL returns the URL of the server with schema as its search_path.
// Its commits do not wait for the disk to have them (synchronous_commit
// off): every connection sees a commit at once all the same, and only a
// crash of the server could lose it, which a test's data need not
// survive.
func schemaURL(schema string) string {
	return withParam(withParam(BaseURL(), "search_path", schema), "synchronous_commit", "off")
}

// DatabaseURL creates an empty database, returns its URL, and drops it when
// t ends. It is slower than SchemaURL (about a second); use it where a test
// needs a database of its own, such as one whose notifications no other
// test sees.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	require(t)
	db := name("cs_test_")
	Exec(t, "CREATE DATABASE "+db)
	t.Cleanup(func() { Exec(t, "DROP DATABASE "+db+" WITH (FORCE)") })
	u, err := url.Parse(BaseURL())
	if err != nil || u.Scheme == "" {
		return BaseURL() + " dbname=" + db
	}
	u.Path = "/" + db
	return u.String()
}

// withParam adds a connection parameter to a URL or a key=value string.
func withParam(base, key, value string) string {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return strings.TrimSpace(base) + " " + key + "=" + value
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// Scan runs a query returning one row on the test server's database,
// outside any test schema, and scans it into dest.
func Scan(t testing.TB, sql string, args []any, dest ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, BaseURL())
	if err != nil {
		t.Fatalf("connect to PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, sql, args...).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
