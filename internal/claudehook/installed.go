package claudehook

import (
	"encoding/json"
	"fmt"
	"os"
)

// Installed is a countersign hook entry found in a settings.json: the event
// it hooks and the command Claude Code runs for it.
type Installed struct {
	Event   string
	Command string
}

// FindInstalled reads a settings.json and returns its countersign hook
// entries, for the events it answers (hookEvents), in the file's order. A
// file that is not a settings object is an error; one without hooks
// returns none.
func FindInstalled(path string) ([]Installed, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	root, err := parseObject(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	hooks, err := root.child("hooks")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Installed
	for _, ev := range hookEvents {
		raw, ok := hooks.get(ev)
		if !ok {
			continue
		}
		var groups []struct {
			Hooks []json.RawMessage `json:"hooks"`
		}
		if err := json.Unmarshal(raw, &groups); err != nil {
			return nil, fmt.Errorf("%s: hooks.%s: not a list of matcher groups", path, ev)
		}
		for _, g := range groups {
			for _, e := range g.Hooks {
				entry, err := parseObject(e)
				if err != nil || !isCountersign(entry, "claude") {
					continue
				}
				var cmd string
				raw, _ := entry.get("command")
				json.Unmarshal(raw, &cmd)
				out = append(out, Installed{Event: ev, Command: cmd})
			}
		}
	}
	return out, nil
}
