package saferm

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// configWorld is a home directory and a system directory for config tests.
type configWorld struct {
	home, system, safeRm string
}

func newConfigWorld(t *testing.T) configWorld {
	dir := t.TempDir()
	return configWorld{
		home:   filepath.Join(dir, "home"),
		system: filepath.Join(dir, "etc", "countersign", "config.toml"),
		safeRm: filepath.Join(dir, "etc", "safe-rm.conf"),
	}
}

func (c configWorld) userConfig() string {
	return filepath.Join(c.home, ".config", "countersign", "config.toml")
}

// load loads with the world's paths and the given environment and flags.
func (c configWorld) load(inv Invocation, env map[string]string) (*Config, error) {
	return LoadConfig(inv, LoadOptions{Getenv: envOf(env), Home: c.home, SystemConfig: c.system, SafeRmConf: c.safeRm})
}

func TestLoadConfigDefaults(t *testing.T) {
	c := newConfigWorld(t)
	cfg, err := c.load(Invocation{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Guard != GuardAuto || cfg.GuardNetworks != nil || cfg.FileThreshold != 100 ||
		cfg.BytesThreshold != 100<<20 || cfg.PollTimeout != 10*time.Minute || cfg.File != "" || cfg.RealRm != "" {
		t.Errorf("defaults = %+v", cfg)
	}
	if !slices.Equal(cfg.AgentMarkers, DefaultAgentMarkers()) {
		t.Errorf("AgentMarkers = %q", cfg.AgentMarkers)
	}
	for _, p := range []string{"/etc", "/usr", "/var/www", "/boot", "/bin", "/lib", "/opt", "/srv", "/root", filepath.Join(c.home, ".ssh")} {
		if !slices.Contains(cfg.ProtectedPaths, p) {
			t.Errorf("ProtectedPaths lacks %s", p)
		}
	}
}

func TestLoadConfigFileChoice(t *testing.T) {
	c := newConfigWorld(t)
	explicit := filepath.Join(filepath.Dir(c.home), "explicit.toml")
	fromEnv := filepath.Join(filepath.Dir(c.home), "env.toml")
	for name, p := range map[string]string{"user": c.userConfig(), "system": c.system, "explicit": explicit, "env": fromEnv} {
		writeFile(t, p, `server_url = "https://`+name+`.example"`)
	}
	tests := []struct {
		name string
		inv  Invocation
		env  map[string]string
		want string
	}{
		{"--config first", Invocation{ConfigFile: explicit}, map[string]string{"COUNTERSIGN_CONFIG": fromEnv}, explicit},
		{"then $COUNTERSIGN_CONFIG", Invocation{}, map[string]string{"COUNTERSIGN_CONFIG": fromEnv}, fromEnv},
		{"then the user's file", Invocation{}, nil, c.userConfig()},
		{"XDG_CONFIG_HOME moves it", Invocation{}, map[string]string{"XDG_CONFIG_HOME": filepath.Join(c.home, "nowhere")}, c.system},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := c.load(tt.inv, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.File != tt.want {
				t.Errorf("File = %s, want %s", cfg.File, tt.want)
			}
			if !slices.Contains(cfg.ProtectedPaths, tt.want) {
				t.Errorf("the config file %s is not protected", tt.want)
			}
		})
	}
	if _, err := c.load(Invocation{ConfigFile: explicit + ".missing"}, nil); err == nil {
		t.Error("a missing --config file loaded")
	}
}

func TestLoadConfigPrecedence(t *testing.T) {
	c := newConfigWorld(t)
	writeFile(t, c.userConfig(), `server_url = "https://file.example"`)
	env := map[string]string{"COUNTERSIGN_URL": "https://env.example"}
	tests := []struct {
		name string
		inv  Invocation
		env  map[string]string
		want string
	}{
		{"file over defaults", Invocation{}, nil, "https://file.example"},
		{"environment over file", Invocation{}, env, "https://env.example"},
		{"flag over environment", Invocation{ServerURL: "https://flag.example"}, env, "https://flag.example"},
	}
	for _, tt := range tests {
		cfg, err := c.load(tt.inv, tt.env)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.ServerURL != tt.want {
			t.Errorf("%s: ServerURL = %s, want %s", tt.name, cfg.ServerURL, tt.want)
		}
	}
}

func TestLoadConfigFile(t *testing.T) {
	c := newConfigWorld(t)
	writeFile(t, filepath.Join(filepath.Dir(c.userConfig()), "agent.key"), "csk_fromfile\n")
	writeFile(t, c.userConfig(), `
server_url = "https://cs.example"
agent_key_file = "agent.key"
poll_timeout = "5m"

[rm]
real_rm = "/usr/bin/rm"
guard = "always"
guard_networks = ["10.0.0.0/8", "192.0.2.7"]
agent_markers = ["MY_AGENT"]
protected_paths = ["/data", "~/notes"]
safe_patterns = ["/tmp/build-*"]
file_threshold = 50
bytes_threshold = 1000
`)
	writeFile(t, c.safeRm, "# system list\n/srv/db\n\nrelative/ignored\n  /mnt/backup  \n")
	cfg, err := c.load(Invocation{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AgentKey != "csk_fromfile" || cfg.PollTimeout != 5*time.Minute || cfg.RealRm != "/usr/bin/rm" ||
		cfg.Guard != GuardAlways || cfg.FileThreshold != 50 || cfg.BytesThreshold != 1000 {
		t.Errorf("config = %+v", cfg)
	}
	if !slices.Equal(cfg.GuardNetworks, []string{"10.0.0.0/8", "192.0.2.7"}) ||
		!slices.Equal(cfg.AgentMarkers, []string{"MY_AGENT"}) || !slices.Equal(cfg.SafePatterns, []string{"/tmp/build-*"}) {
		t.Errorf("lists = %q %q %q", cfg.GuardNetworks, cfg.AgentMarkers, cfg.SafePatterns)
	}
	for _, p := range []string{"/etc", "/data", filepath.Join(c.home, "notes"), "/srv/db", "/mnt/backup", c.userConfig()} {
		if !slices.Contains(cfg.ProtectedPaths, p) {
			t.Errorf("ProtectedPaths lacks %s: %q", p, cfg.ProtectedPaths)
		}
	}
	if slices.Contains(cfg.ProtectedPaths, "relative/ignored") {
		t.Error("a relative safe-rm.conf line was used")
	}
}

// TestLoadConfigEmptyList: a list the file sets, even to nothing, replaces
// the default; one it leaves out keeps it.
func TestLoadConfigEmptyList(t *testing.T) {
	c := newConfigWorld(t)
	writeFile(t, c.userConfig(), "[rm]\nagent_markers = []\nfile_threshold = 7")
	cfg, err := c.load(Invocation{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.AgentMarkers) != 0 || cfg.FileThreshold != 7 || cfg.BytesThreshold != 100<<20 {
		t.Errorf("agent_markers = [] gave %q, thresholds %d %d", cfg.AgentMarkers, cfg.FileThreshold, cfg.BytesThreshold)
	}
	writeFile(t, c.userConfig(), "[rm]\nfile_threshold = 7")
	if cfg, err = c.load(Invocation{}, nil); err != nil || !slices.Equal(cfg.AgentMarkers, DefaultAgentMarkers()) {
		t.Errorf("agent_markers left out gave %q, %v; want the defaults", cfg.AgentMarkers, err)
	}
}

func TestLoadConfigAgentKey(t *testing.T) {
	c := newConfigWorld(t)
	keyFile := filepath.Join(filepath.Dir(c.home), "key")
	writeFile(t, keyFile, "  csk_env_file \n")
	writeFile(t, c.userConfig(), `agent_key = "csk_in_file"`)
	tests := []struct {
		env  map[string]string
		want string
	}{
		{nil, "csk_in_file"},
		{map[string]string{"COUNTERSIGN_KEY": "csk_env"}, "csk_env"},
		{map[string]string{"COUNTERSIGN_KEY_FILE": keyFile}, "csk_env_file"},
	}
	for _, tt := range tests {
		cfg, err := c.load(Invocation{}, tt.env)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.AgentKey != tt.want {
			t.Errorf("env %v: AgentKey = %q, want %q", tt.env, cfg.AgentKey, tt.want)
		}
	}
	_, err := c.load(Invocation{}, map[string]string{"COUNTERSIGN_KEY": "a", "COUNTERSIGN_KEY_FILE": keyFile})
	if err == nil || !strings.Contains(err.Error(), "both set") {
		t.Errorf("both key variables: err = %v", err)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name, file, want string
	}{
		{"unknown top-level key", `protected_paths = ["/x"]`, "unknown keys: protected_paths"},
		{"unknown key in [rm]", "[rm]\nprotectd_paths = [\"/x\"]", "unknown keys: rm.protectd_paths"},
		{"unknown table", "[hook]\nx = 1", "unknown keys: hook"},
		{"bad TOML", `server_url = `, "config"},
		{"bad guard", "[rm]\nguard = \"sometimes\"", `guard "sometimes"`},
		{"bad network", "[rm]\nguard_networks = [\"10.0.0.0/33\"]", "guard_networks"},
		{"relative real rm", "[rm]\nreal_rm = \"rm\"", "real_rm"},
		{"relative protected path", "[rm]\nprotected_paths = [\"data\"]", "protected_paths"},
		{"bad safe pattern", "[rm]\nsafe_patterns = [\"/tmp/[\"]", "safe_patterns"},
		{"bad server URL", `server_url = "ftp://x"`, "server_url"},
		{"negative threshold", "[rm]\nfile_threshold = -1", "file_threshold"},
		{"bad duration", `poll_timeout = "soon"`, "config"},
		{"key twice", "agent_key = \"a\"\nagent_key_file = \"/k\"", "both set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newConfigWorld(t)
			writeFile(t, c.userConfig(), tt.file)
			_, err := c.load(Invocation{}, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestConfigAssessor(t *testing.T) {
	c := newConfigWorld(t)
	writeFile(t, c.userConfig(), "[rm]\nprotected_paths = [\"/data\"]\nfile_threshold = 7")
	cfg, err := c.load(Invocation{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Assessor("/tmp")
	if a.Cwd != "/tmp" || a.Home != c.home || a.FileThreshold != 7 || !slices.Contains(a.Protected, "/data") || a.FileCap != DefaultFileCap {
		t.Errorf("Assessor = %+v", a)
	}
	if g := cfg.DetectGuard(envOf(map[string]string{"CLAUDECODE": "1"})); !g.Guarded {
		t.Error("CLAUDECODE=1 not guarded by the default configuration")
	}
}
