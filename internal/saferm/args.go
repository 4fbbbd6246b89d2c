// Package saferm is the client side of the rm wrapper that needs no server:
// it separates the wrapper's flags from rm's arguments, finds the real rm,
// decides whether the session is guarded, assesses the risk of a deletion,
// builds the approval request and renders --dry-run output. The flow that
// talks to the server and execs the real rm calls into this package.
package saferm

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUsage is wrapped by every error about the wrapper's own command line.
var ErrUsage = errors.New("usage")

// Invocation is the wrapper's command line split into its own flags and the
// arguments meant for rm.
type Invocation struct {
	DryRun     bool     // --dry-run: assess and print, delete nothing
	ConfigFile string   // --config FILE
	ServerURL  string   // --server URL
	RmArgs     []string // everything else, in order, for the real rm
}

// ParseArgs separates the wrapper's flags (--dry-run, --config FILE,
// --server URL, also as --flag=value) from rm's arguments. The flags may
// appear anywhere before rm's "--"; after it every argument is rm's, so a
// file literally named --dry-run can still be deleted with "rm -- --dry-run".
// args excludes the program name.
func ParseArgs(args []string) (Invocation, error) {
	var inv Invocation
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			// rm's end of options: the rest, "--" included, is rm's.
			inv.RmArgs = append(inv.RmArgs, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(a, "=")
		switch {
		case a == "--dry-run":
			inv.DryRun = true
		case name == "--config" || name == "--server":
			if !hasValue {
				if i+1 >= len(args) {
					return Invocation{}, fmt.Errorf("%w: %s needs a value", ErrUsage, name)
				}
				i++
				value = args[i]
			}
			if value == "" {
				return Invocation{}, fmt.Errorf("%w: %s needs a non-empty value", ErrUsage, name)
			}
			if name == "--config" {
				inv.ConfigFile = value
			} else {
				inv.ServerURL = value
			}
		default:
			inv.RmArgs = append(inv.RmArgs, a)
		}
	}
	return inv, nil
}

// RmFlags is what an rm command line asks for, as GNU rm would read it.
type RmFlags struct {
	Recursive      bool     // -r, -R, --recursive
	Force          bool     // -f, --force
	NoPreserveRoot bool     // --no-preserve-root
	Operands       []string // the files, in order
}

// rmLongOptions are GNU rm's long options. getopt_long accepts any
// unambiguous prefix, so "--rec" is --recursive and must count as such.
var rmLongOptions = []string{
	"dir", "force", "help", "interactive", "no-preserve-root",
	"one-file-system", "preserve-root", "recursive", "verbose", "version",
}

// ParseRmArgs reads rm's arguments the way GNU rm does: options may follow
// operands (getopt permutes), short options combine (-rf, -Rfv), "--" ends
// the options, and "-" alone is a file name.
func ParseRmArgs(args []string) RmFlags {
	var f RmFlags
	for i, a := range args {
		switch {
		case a == "--":
			f.Operands = append(f.Operands, args[i+1:]...)
			return f
		case strings.HasPrefix(a, "--"):
			f.setLong(a[2:])
		case len(a) > 1 && a[0] == '-':
			f.setShort(a[1:])
		default:
			f.Operands = append(f.Operands, a)
		}
	}
	return f
}

// setLong records a long option, resolving abbreviations; an unknown or
// ambiguous option makes rm fail before deleting anything, so it is ignored.
func (f *RmFlags) setLong(opt string) {
	name, _, _ := strings.Cut(opt, "=")
	match := ""
	for _, o := range rmLongOptions {
		if o == name {
			match = o
			break
		}
		if strings.HasPrefix(o, name) && name != "" {
			if match != "" {
				return // ambiguous
			}
			match = o
		}
	}
	switch match {
	case "recursive":
		f.Recursive = true
	case "force":
		f.Force = true
	case "no-preserve-root":
		f.NoPreserveRoot = true
	}
}

// setShort records a cluster of short options such as "rfv".
func (f *RmFlags) setShort(cluster string) {
	for _, c := range cluster {
		switch c {
		case 'r', 'R':
			f.Recursive = true
		case 'f':
			f.Force = true
		}
	}
}
