package saferm

import (
	"errors"
	"reflect"
	"testing"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want Invocation
	}{
		{"no arguments", nil, Invocation{}},
		{"rm only", []string{"-rf", "dir"}, Invocation{RmArgs: []string{"-rf", "dir"}}},
		{"dry-run among rm args", []string{"-rf", "--dry-run", "dir"},
			Invocation{DryRun: true, RmArgs: []string{"-rf", "dir"}}},
		{"config and server with separate values", []string{"--config", "/c.toml", "-r", "--server", "https://s", "a"},
			Invocation{ConfigFile: "/c.toml", ServerURL: "https://s", RmArgs: []string{"-r", "a"}}},
		{"config and server with =", []string{"--config=/c.toml", "a", "--server=https://s"},
			Invocation{ConfigFile: "/c.toml", ServerURL: "https://s", RmArgs: []string{"a"}}},
		{"a value may start with a dash", []string{"--config", "-odd.toml", "a"},
			Invocation{ConfigFile: "-odd.toml", RmArgs: []string{"a"}}},
		{"after -- a file named --dry-run is rm's", []string{"--", "--dry-run"},
			Invocation{RmArgs: []string{"--", "--dry-run"}}},
		{"a file named -x after --", []string{"-f", "--", "-x", "--config", "y"},
			Invocation{RmArgs: []string{"-f", "--", "-x", "--config", "y"}}},
		{"wrapper flag before --, file after", []string{"--dry-run", "-r", "--", "-x"},
			Invocation{DryRun: true, RmArgs: []string{"-r", "--", "-x"}}},
		{"lone dash is a file", []string{"-"}, Invocation{RmArgs: []string{"-"}}},
		{"prefix of a wrapper flag is rm's", []string{"--dry", "a"}, Invocation{RmArgs: []string{"--dry", "a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseArgs(tt.args)
			if err != nil {
				t.Fatalf("ParseArgs(%q): %v", tt.args, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseArgs(%q) = %+v, want %+v", tt.args, got, tt.want)
			}
		})
	}
}

func TestParseArgsErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--config"},
		{"-rf", "--server"},
		{"--server="},
		{"--config=", "a"},
	} {
		if _, err := ParseArgs(args); !errors.Is(err, ErrUsage) {
			t.Errorf("ParseArgs(%q) error = %v, want ErrUsage", args, err)
		}
	}
}

func TestParseRmArgs(t *testing.T) {
	tests := []struct {
		args []string
		want RmFlags
	}{
		{[]string{"a"}, RmFlags{Operands: []string{"a"}}},
		{[]string{"-rf", "a"}, RmFlags{Recursive: true, Force: true, Operands: []string{"a"}}},
		{[]string{"-fr", "a"}, RmFlags{Recursive: true, Force: true, Operands: []string{"a"}}},
		{[]string{"-Rfv", "a"}, RmFlags{Recursive: true, Force: true, Operands: []string{"a"}}},
		{[]string{"-r", "-f", "a", "b"}, RmFlags{Recursive: true, Force: true, Operands: []string{"a", "b"}}},
		{[]string{"--recursive", "--force", "a"}, RmFlags{Recursive: true, Force: true, Operands: []string{"a"}}},
		{[]string{"--rec", "--fo", "a"}, RmFlags{Recursive: true, Force: true, Operands: []string{"a"}}},
		{[]string{"--v", "a"}, RmFlags{Operands: []string{"a"}}},                 // ambiguous: verbose/version
		{[]string{"a", "-r"}, RmFlags{Recursive: true, Operands: []string{"a"}}}, // getopt permutes
		{[]string{"-i", "-v", "-d", "a"}, RmFlags{Operands: []string{"a"}}},
		{[]string{"--", "-x", "-rf"}, RmFlags{Operands: []string{"-x", "-rf"}}},
		{[]string{"-f", "--", "--", "-r"}, RmFlags{Force: true, Operands: []string{"--", "-r"}}},
		{[]string{"-"}, RmFlags{Operands: []string{"-"}}},
		{[]string{"--no-preserve-root", "-r", "/"}, RmFlags{Recursive: true, NoPreserveRoot: true, Operands: []string{"/"}}},
		{[]string{"--interactive=never", "a"}, RmFlags{Operands: []string{"a"}}},
	}
	for _, tt := range tests {
		if got := ParseRmArgs(tt.args); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseRmArgs(%q) = %+v, want %+v", tt.args, got, tt.want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain/path-1.txt", "plain/path-1.txt"},
		{"-rf", "-rf"},
		{"", "''"},
		{"my file", "'my file'"},
		{"it's", `'it'\''s'`},
		{"*.txt", "'*.txt'"},
		{"$HOME", "'$HOME'"},
		{"=cmd", "'=cmd'"},
		{"a\nb", `$'a\nb'`},
		{"x\u202eevil", `$'x\u202eevil'`},
		{"it's\t", `$'it\'s\t'`},
		{"bad\xffbyte", `$'bad\xffbyte'`},
		{"café", "'café'"},
	}
	for _, tt := range tests {
		if got := ShellQuote(tt.in); got != tt.want {
			t.Errorf("ShellQuote(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
	if got, want := Command([]string{"-rf", "/var/www/my data"}), "rm -rf '/var/www/my data'"; got != want {
		t.Errorf("Command = %s, want %s", got, want)
	}
}
