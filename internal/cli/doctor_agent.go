package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/countersign/countersign/internal/claudehook"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/saferm"
)

// wrapperFix is how to put the rm wrapper first in PATH, as docs/agents.md
// installs it.
const wrapperFix = "mkdir -p ~/.local/countersign-bin && ln -sf \"$(command -v countersign-agent)\" ~/.local/countersign-bin/rm, " +
	"and put ~/.local/countersign-bin first in the PATH of the agent's shells"

// isCountersignBinary reports whether path leads (through links) to the
// countersign or countersign-agent binary.
func isCountersignBinary(path string) (string, bool) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", false
	}
	base := filepath.Base(real)
	return real, base == "countersign" || base == "countersign-agent"
}

// executable reports whether path is an executable file, links followed.
func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// pathRms returns every rm in PATH, in PATH's order, and the first broken
// link named rm met on the way.
func (d *doctor) pathRms() (found []string, broken string) {
	for _, dir := range filepath.SplitList(d.env.Getenv("PATH")) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, "rm")
		if executable(p) {
			found = append(found, p)
		} else if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 && broken == "" && len(found) == 0 {
			broken = p
		}
	}
	return found, broken
}

// checkRm: the rm wrapper is the first rm in PATH, guards agent shells,
// and finds a real rm.
func (d *doctor) checkRm() {
	const check = "rm wrapper"
	found, broken := d.pathRms()
	if broken != "" {
		target, _ := os.Readlink(broken)
		d.add(statusFail, check, fmt.Sprintf("%s, first in PATH, is a link to %s, which does not exist", broken, target), wrapperFix)
		return
	}
	wrapper, wrapperAt := "", -1
	for i, p := range found {
		if real, ok := isCountersignBinary(p); ok {
			wrapper, wrapperAt = real, i
			break
		}
	}
	switch {
	case wrapperAt < 0 && len(found) > 0:
		d.add(statusSkip, check, "the rm in PATH is "+found[0]+": no rm wrapper is installed, so rm is not guarded", wrapperFix)
		return
	case wrapperAt < 0:
		d.add(statusSkip, check, "no rm in PATH", "")
		return
	case wrapperAt > 0:
		d.add(statusFail, check, fmt.Sprintf("the wrapper %s is in PATH after %s, which runs instead", found[wrapperAt], found[0]),
			"put "+filepath.Dir(found[wrapperAt])+" before "+filepath.Dir(found[0])+" in the PATH of the agent's shells")
		return
	}
	cfg, err := saferm.LoadConfig(saferm.Invocation{ConfigFile: d.configFile, ServerURL: d.serverFlag}, saferm.LoadOptions{Getenv: d.env.Getenv})
	if err != nil {
		d.add(statusFail, check, "its configuration does not load: "+err.Error(), "correct the [rm] table of the file")
		return
	}
	if !d.besideFull(check, wrapper) {
		return
	}
	switch cfg.Guard {
	case saferm.GuardNever:
		d.add(statusFail, check, found[0]+` is first in PATH, but guard = "never" in `+cfg.Source()+": it passes every rm through",
			`set guard = "auto" (agent shells) or "always" in the [rm] table`)
	case saferm.GuardAlways:
		d.add(statusOK, check, found[0]+` is first in PATH and guards every shell (guard = "always")`, "")
	default:
		d.add(statusOK, check, fmt.Sprintf("%s is first in PATH and guards agent shells (%s); a shell without a marker passes straight through, as rm --dry-run explains",
			found[0], strings.Join(cfg.AgentMarkers, ", ")), "")
	}
	realRm, err := saferm.FindRealRm(cfg.RealRm, wrapper)
	if err != nil {
		d.add(statusFail, "real rm", err.Error(), `set real_rm = "/bin/rm" (the system's rm, an absolute path) in the [rm] table of `+cfg.Source())
		return
	}
	d.add(statusOK, "real rm", realRm, "")
}

// besideFull checks that the countersign binary is beside a
// countersign-agent, which hands it what must be asked.
func (d *doctor) besideFull(check, bin string) bool {
	if filepath.Base(bin) != "countersign-agent" {
		return true
	}
	full := filepath.Join(filepath.Dir(bin), "countersign")
	if !executable(full) {
		d.add(statusFail, check, bin+" asks the server through the countersign binary beside it, and "+full+" is missing",
			"install both in one directory: go build -o "+filepath.Dir(bin)+"/ ./cmd/countersign ./cmd/countersign-agent")
		return false
	}
	return true
}

// settingsFiles are the Claude Code settings files to look in, and whether
// the user named them.
func (d *doctor) settingsFiles() ([]string, bool) {
	if len(d.settings) > 0 {
		return d.settings, true
	}
	var files []string
	if home := d.env.Getenv("HOME"); home != "" {
		files = append(files, filepath.Join(home, ".claude", "settings.json"))
	}
	return append(files, filepath.Join(".claude", "settings.json"), filepath.Join(".claude", "settings.local.json")), false
}

// checkHook: the Claude Code hook is in a settings file and its command
// starts an existing binary.
func (d *doctor) checkHook() {
	const check = "claude hook"
	files, named := d.settingsFiles()
	installFix := "countersign hook claude install --settings ~/.claude/settings.json"
	var none []string
	for _, f := range files {
		if _, err := os.Stat(f); !named && err != nil {
			continue
		}
		hooks, err := claudehook.FindInstalled(f)
		if err != nil {
			d.add(statusFail, check, err.Error(), "correct the file: Claude Code cannot read it either")
			continue
		}
		if len(hooks) == 0 {
			none = append(none, f)
			continue
		}
		for _, h := range hooks {
			d.checkHookCommand(f, h)
		}
	}
	switch {
	case len(none) == 0:
	case named:
		d.add(statusFail, check, "not installed in "+strings.Join(none, ", "), "countersign hook claude install --settings "+none[0])
	case len(d.findingsOf(check)) == 0:
		d.add(statusSkip, check, "not installed in "+strings.Join(none, ", "), installFix)
	}
	if len(d.findingsOf(check)) == 0 {
		d.add(statusSkip, check, "no Claude Code settings file ("+strings.Join(files, ", ")+")", installFix)
	}
}

// findingsOf returns the findings of one check so far.
func (d *doctor) findingsOf(check string) []finding {
	var out []finding
	for _, f := range d.findings {
		if f.check == check {
			out = append(out, f)
		}
	}
	return out
}

// checkHookCommand checks the binary an installed hook entry starts.
func (d *doctor) checkHookCommand(file string, h claudehook.Installed) {
	const check = "claude hook"
	fields := strings.Fields(h.Command)
	bin := fields[0]
	where := bin
	if !strings.ContainsRune(bin, filepath.Separator) {
		where = ""
		for _, dir := range filepath.SplitList(d.env.Getenv("PATH")) {
			if p := filepath.Join(dir, bin); executable(p) {
				where = p
				break
			}
		}
	}
	fix := "countersign hook claude install --settings " + file + " (it updates the entry in place)"
	if where == "" || !executable(where) {
		d.add(statusFail, check, fmt.Sprintf("%s in %s starts %s, which does not exist", h.Event, file, bin), fix)
		return
	}
	real, _ := filepath.EvalSymlinks(where)
	if !d.besideFull(check, real) {
		return
	}
	d.add(statusOK, check, fmt.Sprintf("%s in %s runs %s", h.Event, file, h.Command), "")
}

// checkMCP: the gateway's configuration loads, and each upstream answers
// tools/list.
func (d *doctor) checkMCP(ctx context.Context) {
	const check = "mcp"
	if d.mcpConfig == "" {
		d.add(statusSkip, check, "no MCP gateway configuration (--mcp-config, COUNTERSIGN_MCP_CONFIG)", "")
		return
	}
	cfg, err := gateway.LoadConfig(d.mcpConfig)
	if err != nil {
		d.add(statusFail, check, err.Error(), "correct the file: countersign serve and countersign mcp refuse it too")
		return
	}
	if len(cfg.Upstreams) == 0 {
		d.add(statusFail, check, d.mcpConfig+" names no upstream", "add an [[upstream]] with a command or a url")
		return
	}
	upstreams := "1 upstream"
	if n := len(cfg.Upstreams); n != 1 {
		upstreams = fmt.Sprintf("%d upstreams", n)
	}
	d.add(statusOK, check, d.mcpConfig+" loads: "+upstreams, "")
	for _, u := range cfg.Upstreams {
		d.probe(ctx, u)
	}
}

// probe checks that one upstream answers tools/list within doctorTimeout.
func (d *doctor) probe(ctx context.Context, u gateway.UpstreamConfig) {
	const check = "mcp"
	what := "upstream " + u.Name
	if u.URL != "" {
		if p, err := url.Parse(u.URL); err == nil {
			what += " (" + showURL(p) + ")"
		}
	} else if len(u.Command) > 0 {
		what += " (" + u.Command[0] + ")"
	}
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	n, err := gateway.Probe(ctx, u, io.Discard)
	if err != nil {
		reason := err.Error()
		if ctx.Err() != nil {
			reason = fmt.Sprintf("no answer within %s", doctorTimeout)
		} else if u.URL != "" {
			reason = hideURLs(err, u.URL)
		}
		d.add(statusFail, check, what+" does not answer tools/list: "+reason,
			"run its command (or open its URL) by hand to see why; the gateway starts it the same way")
		return
	}
	d.add(statusOK, check, fmt.Sprintf("%s answers tools/list: %d tools", what, n), "")
}

// urlInText is a URL in the text of an error, up to a space or a quote.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// hideURLs is the text of err, the error of the upstream at the URL raw,
// with every URL in it shown as showURL shows one: scheme, host and path,
// without user info, query or fragment, which can hold secrets. net/http
// names the URL of a request that failed with its password as "***" and
// its query whole; another layer may name it as configured. When a part
// of raw that showURL leaves out is in the text still, the text is not
// shown at all: its user name, password, query, fragment, or a value of
// the query.
func hideURLs(err error, raw string) string {
	reason := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		shown := "(the URL)"
		if p, perr := url.Parse(ue.URL); perr == nil {
			shown = showURL(p)
		}
		reason = strings.ReplaceAll(reason, ue.Error(), ue.Op+" "+strconv.Quote(shown)+": "+ue.Err.Error())
	}
	p, perr := url.Parse(raw)
	if perr != nil {
		return "(its error is not shown: it may hold the URL, which does not parse)"
	}
	shown := showURL(p)
	for _, form := range []string{raw, p.String(), p.Redacted()} {
		reason = strings.ReplaceAll(reason, strconv.Quote(form), strconv.Quote(shown))
		reason = strings.ReplaceAll(reason, form, shown)
	}
	reason = urlInText.ReplaceAllStringFunc(reason, func(s string) string {
		if q, err := url.Parse(s); err == nil && q.Host != "" {
			return showURL(q)
		}
		return "(a URL)"
	})
	password, _ := p.User.Password()
	secrets := []string{p.User.Username(), password, p.RawQuery, p.Fragment}
	for _, pair := range strings.FieldsFunc(p.RawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		_, v, ok := strings.Cut(pair, "=")
		if !ok {
			v = pair
		}
		secrets = append(secrets, v)
		if v, err := url.QueryUnescape(v); err == nil {
			secrets = append(secrets, v)
		}
	}
	for _, secret := range secrets {
		if len(secret) >= minHidden && strings.Contains(reason, secret) {
			return "(its error is not shown: it holds a part of the URL that may be secret)"
		}
	}
	return reason
}

// minHidden is the shortest part of a URL that hideURLs looks for in an
// error's text once its URLs are hidden: a shorter one is found in any
// text.
const minHidden = 4
