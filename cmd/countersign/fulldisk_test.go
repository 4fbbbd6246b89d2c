package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testutil"
)

// TestFullDisk: a server whose data disk fills up answers 503 with the
// reason, on /healthz and on the writes that fail, and logs the episode
// once, not once per request; once space is freed it writes again within
// seconds and /healthz says ok by itself, with the SQLite log under the
// bound it was given.
func TestFullDisk(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	b.data = filepath.Join(testutil.Tmpfs(t, 24<<20), "data")
	s := b.serve("--sqlite-log-mb", "1", "--max-pending", "10000", "--rate-limit", "0")
	fs := s.parseFirstStart()
	create := func(i int) (int, []byte) {
		body := fmt.Sprintf(`{"kind":"generic","action":"fill %d %s","context":{"user":"test","host":"ci"}}`, i, strings.Repeat("x", 2000))
		return call(t, "POST", s.URL+"/api/v1/requests", fs.key, body)
	}
	health := func() (int, map[string]any) {
		code, body := call(t, "GET", s.URL+"/healthz", "", "")
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("/healthz: %v; %s", err, body)
		}
		return code, m
	}
	if code, _ := create(0); code != http.StatusCreated {
		t.Fatalf("create on an empty disk: %d", code)
	}
	filler := testutil.FillDisk(t, b.data)

	failed := 0
	for i := 1; i < 2000 && failed < 20; i++ {
		code, body := create(i)
		switch code {
		case http.StatusCreated:
		case http.StatusServiceUnavailable:
			failed++
			if !strings.Contains(string(body), `"message":"the store cannot write: the disk is full; try again later."`) {
				t.Fatalf("a create on a full disk: %s", body)
			}
		default:
			t.Fatalf("a create on a full disk: %d %s", code, body)
		}
	}
	if failed < 20 {
		t.Fatalf("%d creates failed on a full disk", failed)
	}
	if code, m := health(); code != http.StatusServiceUnavailable || m["status"] != "unavailable" || m["reason"] != "the store cannot write: the disk is full" {
		t.Errorf("/healthz on a full disk: %d %v", code, m)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	var code int
	var hm map[string]any
	if !testutil.Wait(func() bool {
		code, hm = health()
		return code == http.StatusOK && hm["status"] == "ok"
	}, testutil.EventuallyWithin) {
		t.Fatalf("/healthz after space was freed: %d %v\n%s", code, hm, s.stderr)
	}
	if code, body := create(9999); code != http.StatusCreated {
		t.Fatalf("create once space was freed: %d %s", code, body)
	}
	var size int64
	var err error
	if !testutil.Wait(func() bool {
		var fi os.FileInfo
		if fi, err = os.Stat(filepath.Join(b.data, "countersign.db-wal")); err == nil {
			size = fi.Size()
		}
		return err == nil && size <= 1<<20
	}, testutil.EventuallyWithin) {
		t.Fatalf("the log is over its bound of 1 MiB: %d %v", size, err)
	}

	_, metrics := call(t, "GET", s.URL+"/metrics", "", "")
	m := regexp.MustCompile(`(?m)^countersign_store_write_failures_total\{cause="disk_full"\} ([0-9]+)$`).FindSubmatch(metrics)
	if m == nil {
		t.Errorf("the metrics count no write failed for a full disk:\n%s", metrics)
	} else if n, _ := strconv.Atoi(string(m[1])); n < failed {
		t.Errorf("%d creates failed; the metrics count %d writes failed for a full disk", failed, n)
	}

	logs := s.stderr.String()
	starts, ends := strings.Count(logs, "the store cannot write;"), strings.Count(logs, "the store writes again")
	if starts == 0 || starts != ends || starts > failed/4 || strings.Contains(logs, "internal error") {
		t.Errorf("%d writes failed; %d episodes logged as started, %d as ended:\n%s", failed, starts, ends, logs)
	}
}
