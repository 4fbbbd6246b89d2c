package notify

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/countersign/countersign"
)

// fileChannel is one [[channel]] of the configuration file.
type fileChannel struct {
	Account string `toml:"account"`
	Name    string `toml:"name"`
	Type    string `toml:"type"`
	Settings
	// SecretFile names the file that holds the secret (webhook signing
	// secret, SMTP password, ntfy token), relative to the configuration
	// file. Secrets are never written in the file itself.
	SecretFile string `toml:"secret_file"`
}

// LoadFile reads the channels of a configuration file (TOML):
//
//	[[channel]]
//	account     = "default"
//	name        = "mail"
//	type        = "email"
//	smtp_host   = "smtp.example.com"
//	smtp_username = "countersign@example.com"
//	secret_file = "/run/secrets/smtp-password"
//	from        = "countersign <countersign@example.com>"
//	to          = ["admin@example.com"]
//
// An unknown key is an error, so that a typo does not silently drop a
// setting. The secrets are read from their files; the specs are checked
// when they are applied.
func LoadFile(path string) ([]Spec, error) {
	var f struct {
		Channels []fileChannel `toml:"channel"`
	}
	md, err := toml.DecodeFile(path, &f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		keys := make([]string, len(undecoded))
		for i, k := range undecoded {
			keys[i] = k.String()
		}
		return nil, countersign.Errorf(countersign.EINVALID, "%s: unknown keys: %s", path, strings.Join(keys, ", "))
	}
	specs := make([]Spec, 0, len(f.Channels))
	for i, c := range f.Channels {
		if c.Account == "" {
			c.Account = "default"
		}
		spec := Spec{Account: c.Account, Name: c.Name, Type: countersign.ChannelType(c.Type), Settings: c.Settings}
		if c.SecretFile != "" {
			p := c.SecretFile
			if !filepath.IsAbs(p) {
				p = filepath.Join(filepath.Dir(path), p)
			}
			b, err := os.ReadFile(filepath.Clean(p))
			if err != nil {
				return nil, fmt.Errorf("%s: channel %d (%s): read secret_file: %w", path, i+1, c.Name, err)
			}
			spec.Secret = strings.TrimSpace(string(b))
		}
		specs = append(specs, spec)
	}
	return specs, nil
}
