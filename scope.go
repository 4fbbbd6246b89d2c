package countersign

import "encoding/json"

// Scope is the shape of what a request asks to do, as the human sees it
// on the decision page: an auto-approve window opened on the request lets
// through only requests of the same shape, and an approval of a hook's
// Bash call covers only the deletes it names. The agent states its part
// (StatedScope: which commands and paths); the server checks it against
// the request and adds the classes of its risk reasons.
type Scope struct {
	StatedScope
	// Classes are the classes of the request's risk reasons, set by the
	// server: a window covers no request with a class the approved one
	// lacked.
	Classes []string `json:"classes,omitempty"`
	// Tier and Protected are, in the scope of an auto-approve window, the
	// typed facts of the request that opened it (see Request), set by the
	// server when the window opens: a window covers no request of another
	// tier and no protected request unless the approved one was. A
	// request's own scope leaves them empty; its fields hold them.
	Tier      Tier `json:"tier,omitempty"`
	Protected bool `json:"protected,omitempty"`
}

// StatedScope is the shape of an action as the agent states it: for a
// Bash call, the program and subcommand of every command of the line; the
// absolute, resolved paths it deletes (or a file tool writes); and what
// the deleted paths hold. It is the scope of the v1 API's create body
// (client/api.Scope), and the part of a Scope the agent says.
type StatedScope struct {
	// Commands are, for a Bash call, the program and subcommand of every
	// command the hook judged in the line ("rm", "git push"), sorted,
	// each once.
	Commands []string `json:"commands,omitempty"`
	// Paths are the absolute, resolved paths the action deletes (or, for
	// a file tool, writes), sorted, each once. A window covers only
	// actions within their trees.
	Paths []string `json:"paths,omitempty"`
	// Files and Bytes are what the deleted paths held when the agent
	// asked; FilesCapped when the count stopped at a cap.
	Files       int64 `json:"files,omitempty"`
	Bytes       int64 `json:"bytes,omitempty"`
	FilesCapped bool  `json:"files_capped,omitempty"`
}

// EncodeScope is a scope as the stores keep it: JSON, "" for none.
func EncodeScope(s *Scope) string {
	if s == nil {
		return ""
	}
	b, _ := json.Marshal(s) // strings, numbers and booleans only: never fails
	return string(b)
}

// DecodeScope reads a scope EncodeScope wrote; "" is none.
func DecodeScope(text string) (*Scope, error) {
	if text == "" {
		return nil, nil
	}
	var s Scope
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return nil, err
	}
	return &s, nil
}
