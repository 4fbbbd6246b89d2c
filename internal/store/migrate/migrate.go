// Package migrate reads the numbered schema changes a store embeds. Each
// backend applies them with its own SQL and locking; which files are
// migrations, in which order, and when a database is too new are decided
// here once.
package migrate

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered schema change: the file NNNN_name.sql.
type Migration struct {
	Version int
	Name    string // the file's base name
	SQL     string
}

// Load returns the migrations of fsys, the files migrations/*.sql, in
// order of version. A file not named NNNN_name.sql with a positive NNNN,
// two files of one version, or no file at all is an error: the files are
// part of the binary, so such an error is a build mistake.
func Load(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %s is not named NNNN_name.sql", base)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: base, SQL: string(b)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no migration files")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("two migrations have version %d", out[i].Version)
		}
	}
	return out, nil
}

// MustLoad is Load for the files a store embeds; it panics on an error,
// which then fails every test of the store.
func MustLoad(fsys fs.FS, store string) []Migration {
	ms, err := Load(fsys)
	if err != nil {
		panic(store + ": " + err.Error())
	}
	return ms
}

// Latest is the newest version of ms, which Load returned.
func Latest(ms []Migration) int {
	return ms[len(ms)-1].Version
}

// CheckVersion refuses a database at version current that a newer binary,
// knowing migrations up to known, has migrated further: this binary would
// not know its schema.
func CheckVersion(current, known int) error {
	if current > known {
		return fmt.Errorf("database schema version %d is newer than this binary (%d); upgrade countersign", current, known)
	}
	return nil
}
