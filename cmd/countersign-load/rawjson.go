package main

import (
	"encoding/json"
	"errors"
	"fmt"
)

// scanAnswer reads the top-level "id" and "status" of a request in an
// answer. Decoding the answer into a struct with encoding/json costs about
// three times as much CPU as this: json.Valid checks the whole document,
// and a walk of the validated document then finds the two members without
// reflection.
//
// The document must be a JSON object; "id" and "status", when present,
// must be strings (the last one wins when a name repeats, as with
// encoding/json). Unlike encoding/json, member names match exactly, not
// ignoring case. An absent member reads as "".
func scanAnswer(body []byte) (answer, error) {
	if !json.Valid(body) {
		return answer{}, errors.New("invalid JSON")
	}
	i := skipSpace(body, 0)
	if body[i] != '{' {
		return answer{}, errors.New("not a JSON object")
	}
	var id, status []byte // the values as JSON
	i = skipSpace(body, i+1)
	for body[i] != '}' {
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
		end := endOfString(body, i)
		name := body[i:end]
		i = skipSpace(body, skipSpace(body, end)+1) // past the colon
		vend := endOfValue(body, i)
		switch {
		case nameIs(name, "id"):
			id = body[i:vend]
		case nameIs(name, "status"):
			status = body[i:vend]
		}
		i = skipSpace(body, vend)
	}
	var a answer
	var err error
	if a.ID, err = stringValue(id); err != nil {
		return answer{}, fmt.Errorf("id: %w", err)
	}
	if a.Status, err = stringValue(status); err != nil {
		return answer{}, fmt.Errorf("status: %w", err)
	}
	return a, nil
}

// nameIs reports whether the member name (a JSON string) is want.
func nameIs(name []byte, want string) bool {
	if len(name) == len(want)+2 && string(name[1:len(name)-1]) == want {
		return true
	}
	if !needsDecoding(name) {
		return false
	}
	var s string
	return json.Unmarshal(name, &s) == nil && s == want
}

// stringValue decodes a JSON string; nil is an absent member.
func stringValue(v []byte) (string, error) {
	switch {
	case v == nil:
		return "", nil
	case v[0] != '"':
		return "", fmt.Errorf("%.20s is not a string", v)
	case !needsDecoding(v):
		return string(v[1 : len(v)-1]), nil
	}
	var s string
	err := json.Unmarshal(v, &s)
	return s, err
}

// needsDecoding reports whether a JSON string has escapes or bytes beyond
// ASCII, which encoding/json decodes or replaces.
func needsDecoding(s []byte) bool {
	for _, c := range s {
		if c == '\\' || c >= 0x80 {
			return true
		}
	}
	return false
}

// The walk below relies on json.Valid having accepted the document.

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// endOfString returns the index after the string that starts at i.
func endOfString(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// endOfValue returns the index after the value that starts at i.
func endOfValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return endOfString(b, i)
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = endOfString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	}
	// A number, true, false or null.
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}
