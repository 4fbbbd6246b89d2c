package cli

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRunDispatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{nil, 2, "usage: countersign <command> [flags]"},
		{[]string{"help"}, 0, "Run 'countersign <command> -h' for its flags."},
		{[]string{"--help"}, 0, "  serve     run the server"},
		{[]string{"nope"}, 2, `countersign: unknown command "nope"`},
		{[]string{"serve", "-h"}, 0, "COUNTERSIGN_REQUEST_TTL"},
		{[]string{"key"}, 2, "countersign key: usage: name one of: create, list, revoke"},
		{[]string{"list", "--token"}, 2, "flag needs an argument: -token"},
	}
	for _, tt := range tests {
		env, stdout, stderr := testEnv(nil)
		code := Run(context.Background(), env, tt.args)
		if code != tt.code || !strings.Contains(stderr.String(), tt.stderr) || stdout.Len() != 0 {
			t.Errorf("Run(%q) = %d, stdout %q, stderr %q; want %d and %q", tt.args, code, stdout, stderr, tt.code, tt.stderr)
		}
	}
}

func TestParseInterleaved(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args       []string
		positional []string
		reason     string
	}{
		{[]string{"K7F-2QX", "--reason", "not today"}, []string{"K7F-2QX"}, "not today"},
		{[]string{"--reason", "x", "K7F-2QX"}, []string{"K7F-2QX"}, "x"},
		{[]string{"a", "--reason=y", "b"}, []string{"a", "b"}, "y"},
		{[]string{"--", "--reason", "z"}, []string{"--reason", "z"}, ""},
		{[]string{"a", "--", "-b"}, []string{"a", "-b"}, ""},
		{nil, nil, ""},
	}
	for _, tt := range tests {
		env, _, _ := testEnv(nil)
		fs := newFlags(env, "deny")
		reason := fs.String("reason", "", "")
		got, err := parse(fs, tt.args)
		if err != nil || !slices.Equal(got, tt.positional) || *reason != tt.reason {
			t.Errorf("parse(%q) = %q, reason %q, %v; want %q, reason %q", tt.args, got, *reason, err, tt.positional, tt.reason)
		}
	}

	env, _, _ := testEnv(nil)
	fs := newFlags(env, "deny")
	fs.String("reason", "", "")
	if _, err := parse(fs, []string{"K7F-2QX", "--why"}); !errors.Is(err, ErrUsage) {
		t.Errorf("an unknown flag after a positional: %v, want a usage error", err)
	}
	if _, err := parse(newFlags(env, "x"), []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
}

func TestDataDir(t *testing.T) {
	t.Parallel()
	env, _, _ := testEnv(map[string]string{"COUNTERSIGN_DATA": "/from/env"})
	if got := dataDir(env, "/from/flag"); got != "/from/flag" {
		t.Errorf("flag: %q", got)
	}
	if got := dataDir(env, ""); got != "/from/env" {
		t.Errorf("environment: %q", got)
	}
	empty, _, _ := testEnv(nil)
	if got := dataDir(empty, ""); got != "countersign-data" {
		t.Errorf("default: %q", got)
	}
}

func TestSecretFromEnv(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("cst_fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		vars    map[string]string
		want    string
		wantErr bool
	}{
		{map[string]string{"COUNTERSIGN_TOKEN": "cst_direct", "COUNTERSIGN_TOKEN_FILE": file}, "cst_direct", false},
		{map[string]string{"COUNTERSIGN_TOKEN_FILE": file}, "cst_fromfile", false},
		{map[string]string{"COUNTERSIGN_TOKEN_FILE": file + ".missing"}, "", true},
		{nil, "", false},
	}
	for _, tt := range tests {
		env, _, _ := testEnv(tt.vars)
		got, err := secretFromEnv(env, "COUNTERSIGN_TOKEN")
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("secretFromEnv with %v = %q, %v; want %q, error %v", tt.vars, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "COUNTERSIGN_TOKEN_FILE") {
			t.Errorf("the error does not name the variable: %v", err)
		}
	}
}

// TestApproverClientSources: flags beat the environment, which beats
// approver.toml in the config directory.
func TestApproverClientSources(t *testing.T) {
	t.Parallel()
	config := t.TempDir()
	dir := filepath.Join(config, "countersign")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	toml := "url = \"https://file.example\"\ntoken = \"cst_file\"\n"
	if err := os.WriteFile(filepath.Join(dir, "approver.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		vars          map[string]string
		server, token string
		wantURL       string
		wantToken     string
	}{
		{"file", map[string]string{}, "", "", "https://file.example", "cst_file"},
		{"env", map[string]string{"COUNTERSIGN_URL": "http://env.example/", "COUNTERSIGN_TOKEN": "cst_env"}, "", "", "http://env.example", "cst_env"},
		{"flags", map[string]string{"COUNTERSIGN_URL": "http://env.example", "COUNTERSIGN_TOKEN": "cst_env"}, "http://flag.example", "cst_flag", "http://flag.example", "cst_flag"},
	}
	for _, tt := range tests {
		tt.vars["XDG_CONFIG_HOME"] = config
		env, _, _ := testEnv(tt.vars)
		c, err := approverClient(env, tt.server, tt.token)
		if err != nil || c.BaseURL != tt.wantURL || c.Credential != tt.wantToken {
			t.Errorf("%s: client %+v, %v; want %s with %s", tt.name, c, err, tt.wantURL, tt.wantToken)
		}
	}

	// Nothing anywhere: the default server, and a usage error that says
	// how to get a token.
	env, _, _ := testEnv(map[string]string{"XDG_CONFIG_HOME": t.TempDir()})
	if _, err := approverClient(env, "", ""); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "countersign token create --approver NAME") {
		t.Errorf("no token: %v", err)
	}
	env, _, _ = testEnv(map[string]string{"XDG_CONFIG_HOME": t.TempDir(), "COUNTERSIGN_TOKEN": "cst_x"})
	if c, err := approverClient(env, "", ""); err != nil || c.BaseURL != "http://127.0.0.1:8080" {
		t.Errorf("default server: %+v, %v", c, err)
	}

	// A broken file is an error that names it, not a silent fallback.
	broken := t.TempDir()
	os.MkdirAll(filepath.Join(broken, "countersign"), 0o700)
	os.WriteFile(filepath.Join(broken, "countersign", "approver.toml"), []byte("url = \n"), 0o600)
	env, _, _ = testEnv(map[string]string{"XDG_CONFIG_HOME": broken, "COUNTERSIGN_TOKEN": "cst_x"})
	if _, err := approverClient(env, "", ""); err == nil || !strings.Contains(err.Error(), "approver.toml") {
		t.Errorf("a broken approver.toml: %v", err)
	}
}

func TestOneLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"rm -rf /var/www/old", 80, "rm -rf /var/www/old"},
		{"a\n  b\tc ", 80, `a\n  b c `}, // a line break shows; a tab is a space (the columns are tabs)
		{"abcdef", 4, "abc…"},
		{"äöüßé", 3, "äö…"},
	}
	for _, tt := range tests {
		if got := oneLine(tt.in, tt.n); got != tt.want {
			t.Errorf("oneLine(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
