package migrate

import (
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"migrations/0002_b.sql":  {Data: []byte("B")},
		"migrations/0001_a.sql":  {Data: []byte("A")},
		"migrations/0010_c.sql":  {Data: []byte("C")},
		"migrations/README.md":   {Data: []byte("not a migration")},
		"other/0003_ignored.sql": {Data: []byte("X")},
	}
	ms, err := Load(fsys)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := []Migration{{1, "0001_a.sql", "A"}, {2, "0002_b.sql", "B"}, {10, "0010_c.sql", "C"}}
	if len(ms) != len(want) {
		t.Fatalf("Load = %+v, want %+v", ms, want)
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("migration %d = %+v, want %+v", i, ms[i], want[i])
		}
	}
	if got := Latest(ms); got != 10 {
		t.Errorf("Latest = %d, want 10", got)
	}
}

func TestLoadRefuses(t *testing.T) {
	tests := []struct {
		name string
		fsys fstest.MapFS
		want string
	}{
		{"no number", fstest.MapFS{"migrations/init.sql": {}}, "migration file init.sql is not named NNNN_name.sql"},
		{"zero", fstest.MapFS{"migrations/0000_a.sql": {}}, "migration file 0000_a.sql is not named NNNN_name.sql"},
		{"not a number", fstest.MapFS{"migrations/00x1_a.sql": {}}, "migration file 00x1_a.sql is not named NNNN_name.sql"},
		{"twice", fstest.MapFS{"migrations/0001_a.sql": {}, "migrations/0001_b.sql": {}}, "two migrations have version 1"},
		{"none", fstest.MapFS{}, "no migration files"},
	}
	for _, tt := range tests {
		_, err := Load(tt.fsys)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: Load error %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestCheckVersion(t *testing.T) {
	for _, current := range []int{0, 3, 4} {
		if err := CheckVersion(current, 4); err != nil {
			t.Errorf("CheckVersion(%d, 4) = %v, want nil", current, err)
		}
	}
	err := CheckVersion(5, 4)
	if want := "database schema version 5 is newer than this binary (4); upgrade countersign"; err == nil || err.Error() != want {
		t.Errorf("CheckVersion(5, 4) = %v, want %q", err, want)
	}
}
