package clientconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// world is a home directory and a system configuration file.
type world struct{ home, system string }

func newWorld(t *testing.T) world {
	dir := t.TempDir()
	return world{home: filepath.Join(dir, "home"), system: filepath.Join(dir, "etc", "countersign", "config.toml")}
}

func (w world) user() string { return filepath.Join(w.home, ".config", "countersign", "config.toml") }

func (w world) load(o Options, env map[string]string) (*Config, error) {
	o.Getenv = func(k string) string { return env[k] }
	o.Home, o.SystemConfig = w.home, w.system
	return Load(o)
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLoadFileChoice(t *testing.T) {
	w := newWorld(t)
	explicit := filepath.Join(w.home, "explicit.toml")
	fromEnv := filepath.Join(w.home, "env.toml")
	for name, p := range map[string]string{"user": w.user(), "system": w.system, "explicit": explicit, "env": fromEnv} {
		write(t, p, `server_url = "https://`+name+`.example"`)
	}
	tests := []struct {
		name string
		o    Options
		env  map[string]string
		want string
	}{
		{"--config first", Options{ConfigFile: explicit}, map[string]string{"COUNTERSIGN_CONFIG": fromEnv}, explicit},
		{"then $COUNTERSIGN_CONFIG", Options{}, map[string]string{"COUNTERSIGN_CONFIG": fromEnv}, fromEnv},
		{"then the user's file", Options{}, nil, w.user()},
		{"then the system's", Options{}, map[string]string{"XDG_CONFIG_HOME": filepath.Join(w.home, "nowhere")}, w.system},
	}
	for _, tt := range tests {
		c, err := w.load(tt.o, tt.env)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if c.File != tt.want || c.Source() != tt.want {
			t.Errorf("%s: File = %s, want %s", tt.name, c.File, tt.want)
		}
	}
	if _, err := w.load(Options{ConfigFile: explicit + ".missing"}, nil); err == nil {
		t.Error("a missing --config file loaded")
	}
}

func TestLoadPrecedence(t *testing.T) {
	w := newWorld(t)
	write(t, w.user(), "server_url = \"https://file.example\"\npoll_timeout = \"5m\"")
	env := map[string]string{"COUNTERSIGN_URL": "https://env.example"}
	tests := []struct {
		name string
		o    Options
		env  map[string]string
		want string
	}{
		{"file over defaults", Options{}, nil, "https://file.example"},
		{"environment over file", Options{}, env, "https://env.example"},
		{"flag over environment", Options{ServerURL: "https://flag.example"}, env, "https://flag.example"},
	}
	for _, tt := range tests {
		c, err := w.load(tt.o, tt.env)
		if err != nil {
			t.Fatal(err)
		}
		if c.ServerURL != tt.want || c.PollTimeout.String() != "5m0s" {
			t.Errorf("%s: ServerURL = %s, PollTimeout = %s; want %s, 5m", tt.name, c.ServerURL, c.PollTimeout, tt.want)
		}
	}
	c, err := newWorld(t).load(Options{}, nil)
	if err != nil || c.PollTimeout != DefaultPollTimeout || c.File != "" || c.Source() != "(environment)" {
		t.Errorf("no file: %+v, %v", c, err)
	}
}

func TestLoadAgentKey(t *testing.T) {
	w := newWorld(t)
	write(t, filepath.Join(filepath.Dir(w.user()), "agent.key"), " csk_relative \n")
	write(t, w.user(), `agent_key_file = "agent.key"`)
	c, err := w.load(Options{}, nil)
	if err != nil || c.AgentKey != "csk_relative" {
		t.Fatalf("a key file relative to the config file: %q, %v", c.AgentKey, err)
	}
	c, err = w.load(Options{}, map[string]string{"COUNTERSIGN_KEY": "csk_env"})
	if err != nil || c.AgentKey != "csk_env" || c.AgentKeyFile != "" {
		t.Errorf("COUNTERSIGN_KEY over the file's key file: %+v, %v", c, err)
	}
	empty := filepath.Join(w.home, "empty.key")
	write(t, empty, "\n")
	tests := []struct {
		name, file string
		env        map[string]string
		want       string
	}{
		{"both variables", "", map[string]string{"COUNTERSIGN_KEY": "a", "COUNTERSIGN_KEY_FILE": empty}, "COUNTERSIGN_KEY and COUNTERSIGN_KEY_FILE are both set"},
		{"both keys in the file", "agent_key = \"a\"\nagent_key_file = \"/k\"", nil, "agent_key and agent_key_file are both set"},
		{"empty key file", "", map[string]string{"COUNTERSIGN_KEY_FILE": empty}, "is empty"},
		{"missing key file", "", map[string]string{"COUNTERSIGN_KEY_FILE": empty + ".missing"}, "agent key"},
	}
	for _, tt := range tests {
		w := newWorld(t)
		if tt.file != "" {
			write(t, w.user(), tt.file)
		}
		if _, err := w.load(Options{}, tt.env); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

// TestLoadRmTable: the [rm] table comes as written, so that the rm wrapper
// can tell a list left out (keep the default) from an empty one (none).
func TestLoadRmTable(t *testing.T) {
	w := newWorld(t)
	write(t, w.user(), "[rm]\nagent_markers = []\nguard = \"always\"\nprotected_paths = [\"/data\"]\n[hook]\nask = [\"mcp__*\"]")
	c, err := w.load(Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Rm
	if r.AgentMarkers == nil || len(*r.AgentMarkers) != 0 {
		t.Errorf("agent_markers = [] read as %v, want an empty list that is set", r.AgentMarkers)
	}
	if r.GuardNetworks != nil || r.SafePatterns != nil || r.RealRm != nil || r.Strict != nil {
		t.Errorf("keys left out read as set: %+v", r)
	}
	if r.Guard == nil || *r.Guard != "always" || len(r.ProtectedPaths) != 1 || r.ProtectedPaths[0] != "/data" {
		t.Errorf("[rm] = %+v", r)
	}
	if len(c.Hook.Ask) != 1 || c.Hook.Ask[0] != "mcp__*" {
		t.Errorf("[hook] = %+v", c.Hook)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct{ name, file, want string }{
		{"unknown top-level key", `protected_paths = ["/x"]`, "unknown keys: protected_paths"},
		{"unknown key in [rm]", "[rm]\nprotectd_paths = [\"/x\"]", "unknown keys: rm.protectd_paths"},
		{"unknown key in [hook]", "[hook]\nalow = [\"Read\"]", "unknown keys: hook.alow"},
		{"bad TOML", `server_url = `, "config"},
		{"bad duration", `poll_timeout = "soon"`, "config"},
	}
	for _, tt := range tests {
		w := newWorld(t)
		write(t, w.user(), tt.file)
		if _, err := w.load(Options{}, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestCheckServerURL(t *testing.T) {
	for url, ok := range map[string]bool{"": true, "https://cs.example": true, "http://127.0.0.1:8080": true, "ftp://x": false, "https://": false, "cs.example": false} {
		if err := (&Config{ServerURL: url}).CheckServerURL(); (err == nil) != ok {
			t.Errorf("CheckServerURL(%q) = %v", url, err)
		}
	}
}
