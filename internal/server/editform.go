package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/callview"
	"github.com/countersign/countersign/internal/limit"
	"github.com/countersign/countersign/internal/visible"
)

// maxEditArgs bounds the arguments an edit in the inbox may have: the
// approve form carries them back, urlencoded (up to three bytes a byte),
// with a passkey's answer, within a page's maxBody.
const maxEditArgs = 12 << 10

// maxEditTargets bounds the targets of a delete the edit form lists.
const maxEditTargets = 200

// The forms of an edit, by what the request is (editFormOf).
const (
	editCommand = "command"   // a Bash call: its command line
	editTargets = "targets"   // a delete of the rm wrapper: which targets stay
	editText    = "text"      // a generic request with a text: the text
	editFields  = "fields"    // an object of a few arguments: each its own field
	editJSON    = "arguments" // anything else, or on asking: the arguments as JSON
)

// maxEditFields bounds the arguments the fields form shows one by one;
// a call of more is edited as JSON.
const maxEditFields = 30

// editForm is the form of an edit: which one, and the values it shows.
type editForm struct {
	// Mode is one of the edit* forms; empty when the request cannot be
	// edited here, Why then says why.
	Mode, Why string
	Command   string
	Targets   []editTarget
	Text      string
	JSON      string
	Label     string // what the JSON is
	Fields    []editField
}

// editField is one argument of the fields form, typed by the value the
// agent sent: a string, a number, true or false, or any other JSON.
// The form names it by its place among the arguments, never by its
// name, which the agent chose.
type editField struct {
	Index       int
	Name        string
	Kind        string // "string", "text" (several lines), "number", "bool", "json"
	Value       string
	True, False bool // a bool's value
}

// editTarget is a target of a delete as a checkbox: its place in the
// request's own list, which the form sends back, never the path.
type editTarget struct {
	Index int
	Path  string
	Keep  bool
}

// objectOf reads arguments as a JSON object, each value as sent; nil
// when they are none.
func objectOf(args json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if len(args) > callview.MaxRaw || json.Unmarshal(args, &m) != nil {
		return nil
	}
	return m
}

// editFormOf is the form that edits req, filled with args: the request's
// own arguments, or an edit of them; asJSON asks for the arguments as
// JSON where a form of fields would do.
func editFormOf(req *countersign.Request, args json.RawMessage, asJSON bool) editForm {
	var f editForm
	if req.SeedID != "" {
		f.Why = "A request of the seed-compatible API cannot be edited: its client runs only what it asked. Approve or deny it as it is."
		return f
	}
	if req.Original != nil {
		f.Why = "This request was edited already: approve or deny it as it is."
		return f
	}
	if len(req.Arguments) > maxEditArgs {
		f.Why = fmt.Sprintf("The arguments of this request are too large to edit here (%d bytes, at most %d): approve or deny it as it is.", len(req.Arguments), maxEditArgs)
		return f
	}
	orig := objectOf(req.Arguments)
	switch {
	case req.Kind == countersign.KindTool && req.Action == "Bash" && callview.Str(req.Arguments, "command") != "":
		f.Mode, f.Command = editCommand, callview.Str(args, "command")
	case req.Kind == countersign.KindRm && orig != nil:
		return targetsForm(f, stringsOf(orig["targets"]), stringsOf(objectOf(args)["targets"]))
	case req.Kind == countersign.KindGeneric && callview.Str(req.Arguments, "text") != "":
		f.Mode, f.Text = editText, callview.Str(args, "text")
	case !asJSON && fieldsFit(orig, objectOf(args)):
		f.Mode, f.Fields = editFields, fieldsOf(orig, objectOf(args))
	default:
		f.Mode, f.JSON, f.Label = editJSON, indentJSON(args), "The arguments"
		switch req.Kind {
		case countersign.KindMCP:
			f.Label = "The arguments of the call"
		case countersign.KindTool:
			f.Label = "The tool's input"
		}
	}
	return f
}

// targetsForm is the form of a delete's targets, those of kept ticked.
func targetsForm(f editForm, targets, kept []string) editForm {
	if len(targets) == 0 {
		f.Why = "This delete names no targets to choose from: approve or deny it as it is."
		return f
	}
	if len(targets) > maxEditTargets {
		f.Why = fmt.Sprintf("This delete has %d targets, too many to choose from here (at most %d): approve or deny it as it is.", len(targets), maxEditTargets)
		return f
	}
	f.Mode = editTargets
	for i, t := range targets {
		f.Targets = append(f.Targets, editTarget{Index: i, Path: visible.Line(limit.Text(t, 4096)), Keep: slices.Contains(kept, t)})
	}
	return f
}

// fieldsFit reports whether args, the arguments of the original orig or
// an edit of them, are edited as fields: an object of a few arguments,
// the same names as the original's.
func fieldsFit(orig, args map[string]json.RawMessage) bool {
	if len(orig) == 0 || len(orig) > maxEditFields || len(args) != len(orig) {
		return false
	}
	for k := range orig {
		if _, ok := args[k]; !ok {
			return false
		}
	}
	return true
}

// sortedKeys are the names of the arguments, in the order of canonical
// JSON's: the places the form names them by.
func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// kindOf is the field kind of a JSON value as the agent sent it.
func kindOf(raw json.RawMessage) string {
	var str string
	switch {
	case json.Unmarshal(raw, &str) == nil:
		if strings.Contains(str, "\n") || len(str) > 80 {
			return "text"
		}
		return "string"
	case string(raw) == "true" || string(raw) == "false":
		return "bool"
	case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
		return "number"
	}
	return "json"
}

// fieldsOf is the fields form of the original's arguments, each typed by
// the original's value, filled with args.
func fieldsOf(orig, args map[string]json.RawMessage) []editField {
	var out []editField
	for i, k := range sortedKeys(orig) {
		f := editField{Index: i, Name: visible.Line(limit.Text(k, 200)), Kind: kindOf(orig[k])}
		v := args[k]
		switch f.Kind {
		case "string", "text":
			json.Unmarshal(v, &f.Value)
		case "bool":
			f.True, f.False = string(v) == "true", string(v) == "false"
		case "number":
			f.Value = string(v)
		default:
			f.Value = indentJSON(v)
		}
		out = append(out, f)
	}
	// In the order the request's page shows them (callview.Fields):
	// what the call acts on first.
	raw, _ := json.Marshal(orig)
	place := map[string]int{}
	for _, cf := range callview.Fields(raw, nil) {
		if _, seen := place[cf.Name]; cf.Depth == 0 && !seen {
			place[cf.Name] = len(place)
		}
	}
	keys := sortedKeys(orig)
	slices.SortStableFunc(out, func(a, b editField) int {
		pa, oka := place[keys[a.Index]]
		pb, okb := place[keys[b.Index]]
		switch {
		case oka && okb:
			return pa - pb
		case oka:
			return -1
		case okb:
			return 1
		}
		return 0
	})
	return out
}

// fieldsArguments reads the fields form: every argument of the original
// by its place, each of the original's kind.
func fieldsArguments(r *http.Request, orig map[string]json.RawMessage, f *editForm) (json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(orig))
	for i, k := range sortedKeys(orig) {
		name := "f" + strconv.Itoa(i)
		j := slices.IndexFunc(f.Fields, func(x editField) bool { return x.Index == i })
		if j < 0 {
			return nil, countersign.Errorf(countersign.EINVALID, "The form does not match the request: open its edit page again")
		}
		fld := &f.Fields[j]
		var raw json.RawMessage
		var err error
		switch fld.Kind {
		case "string", "text":
			var was string
			json.Unmarshal(orig[k], &was)
			fld.Value = asTyped(was, formText(r, name), fld.Kind == "string")
			raw, err = json.Marshal(fld.Value)
		case "bool":
			v := r.PostFormValue(name)
			fld.True, fld.False = v == "true", v == "false"
			if !fld.True && !fld.False {
				return nil, countersign.Errorf(countersign.EINVALID, "%s must be true or false", fld.Name)
			}
			raw = json.RawMessage(v)
		case "number":
			fld.Value = strings.TrimSpace(r.PostFormValue(name))
			raw, err = jsonArguments(fld.Value)
			if err != nil || kindOf(raw) != "number" {
				return nil, countersign.Errorf(countersign.EINVALID, "%s must be a number, such as 3 or 2.5", fld.Name)
			}
		default:
			fld.Value = formText(r, name)
			raw, err = jsonArguments(fld.Value)
			if err != nil {
				return nil, countersign.Errorf(countersign.EINVALID, "%s: %s", fld.Name, strings.TrimPrefix(countersign.ErrorMessage(err), "The arguments are "))
			}
		}
		if err != nil {
			return nil, err
		}
		out[k] = raw
	}
	return json.Marshal(out)
}

// stringsOf reads a JSON list of strings; nil for anything else.
func stringsOf(raw json.RawMessage) []string {
	var out []string
	if json.Unmarshal(raw, &out) != nil {
		return nil
	}
	return out
}

// indentJSON is JSON as a person edits it.
func indentJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// formText is a text field of a form as typed: a browser sends a
// textarea's line breaks as CRLF.
func formText(r *http.Request, name string) string {
	return strings.ReplaceAll(r.PostFormValue(name), "\r\n", "\n")
}

// asTyped is what a form field sent, or the agent's own value when the
// field is that value as a browser sends it back unchanged: line breaks
// as LF, none in a one-line field, NUL as U+FFFD. An argument the
// approver left alone stays exactly as the agent sent it.
func asTyped(was, got string, oneLine bool) string {
	shown := strings.NewReplacer("\r\n", "\n", "\r", "\n", "\x00", "\uFFFD").Replace(was)
	if oneLine {
		shown = strings.NewReplacer("\n", "").Replace(shown)
	}
	if got == shown {
		return was
	}
	return got
}

// editOf reads the edit form of req: the edit, and the form as the
// approver filled it, to show again. Errors: EINVALID with what is
// wrong; the service checks the rest.
func editOf(req *countersign.Request, r *http.Request) (*countersign.Edit, editForm, error) {
	f := editFormOf(req, req.Arguments, r.PostFormValue("as") == "json")
	var args json.RawMessage
	var err error
	switch f.Mode {
	case "":
		return nil, f, countersign.Errorf(countersign.EINVALID, "%s", f.Why)
	case editCommand:
		f.Command = asTyped(callview.Str(req.Arguments, "command"), formText(r, "command"), false)
		if strings.TrimSpace(f.Command) == "" {
			return nil, f, countersign.Errorf(countersign.EINVALID, "The command is empty. To run nothing, deny the request")
		}
		args, err = withField(req.Arguments, "command", f.Command)
	case editTargets:
		var kept []string
		kept, err = keptTargets(r, f.Targets, stringsOf(objectOf(req.Arguments)["targets"]))
		for i := range f.Targets {
			f.Targets[i].Keep = slices.Contains(r.PostForm["keep"], strconv.Itoa(i))
		}
		if err == nil {
			args, err = withField(req.Arguments, "targets", kept)
		}
	case editText:
		f.Text = asTyped(callview.Str(req.Arguments, "text"), formText(r, "text"), false)
		if strings.TrimSpace(f.Text) == "" {
			return nil, f, countersign.Errorf(countersign.EINVALID, "The text is empty")
		}
		args, err = withField(req.Arguments, "text", f.Text)
	case editFields:
		args, err = fieldsArguments(r, objectOf(req.Arguments), &f)
	case editJSON:
		f.JSON = formText(r, "arguments")
		args, err = jsonArguments(f.JSON)
	}
	if err != nil {
		return nil, f, err
	}
	if len(args) > maxEditArgs {
		return nil, f, countersign.Errorf(countersign.EINVALID, "The edited arguments are %d bytes: at most %d can be approved here", len(args), maxEditArgs)
	}
	return &countersign.Edit{Arguments: args}, f, nil
}

// keptTargets are the targets whose boxes are ticked, in the request's
// order: at least one, each a place in the request's own list.
func keptTargets(r *http.Request, boxes []editTarget, targets []string) ([]string, error) {
	keep := make([]bool, len(targets))
	for _, v := range r.PostForm["keep"] {
		i, err := strconv.Atoi(v)
		if err != nil || i < 0 || i >= len(targets) || i >= len(boxes) {
			return nil, countersign.Errorf(countersign.EINVALID, "The form named a target the delete does not have: an edit can only delete fewer")
		}
		keep[i] = true
	}
	var kept []string
	for i, k := range keep {
		if k {
			kept = append(kept, targets[i])
		}
	}
	if len(kept) == 0 {
		return nil, countersign.Errorf(countersign.EINVALID, "Keep at least one target ticked. To delete nothing, deny the request")
	}
	return kept, nil
}

// withField is the arguments object with one field set, every other
// field as sent.
func withField(args json.RawMessage, name string, v any) (json.RawMessage, error) {
	m := objectOf(args)
	if m == nil {
		return nil, countersign.Errorf(countersign.EINVALID, "The request's arguments are not an object: edit them as JSON")
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m[name] = raw
	return json.Marshal(m)
}

// jsonArguments reads the JSON an approver typed, compacted.
func jsonArguments(s string) (json.RawMessage, error) {
	if len(s) > 3*maxEditArgs {
		return nil, countersign.Errorf(countersign.EINVALID, "The arguments are too large: at most %d bytes can be approved here", maxEditArgs)
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, countersign.Errorf(countersign.EINVALID, "The arguments are not JSON: %s", jsonProblem(err))
	}
	if dec.More() {
		return nil, countersign.Errorf(countersign.EINVALID, "The arguments are not JSON: there is more after the first value")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(strings.TrimSpace(s))); err != nil {
		return nil, countersign.Errorf(countersign.EINVALID, "The arguments are not JSON: %s", jsonProblem(err))
	}
	return b.Bytes(), nil
}

// jsonProblem says what is wrong with JSON, without echoing it.
func jsonProblem(err error) string {
	if se, ok := err.(*json.SyntaxError); ok {
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	return "it ends too early or holds something else"
}
