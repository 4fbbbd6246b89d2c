package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/limit"
	"github.com/gowebpki/jcs"
)

// Canonical returns the RFC 8785 canonical form of a JSON value, so that key
// order and number formatting cannot make two hashes of one call or one hash
// of two calls. An empty input is the empty object.
//
// The canonical form writes every number as a double. A number a double
// cannot hold (9007199254740993, which becomes …992) would give two
// different calls one hash, and an approval of one would pass the other:
// such a number is refused with ErrInexactNumber. Arguments nested deeper
// than limit.MaxJSONDepth are refused with limit.ErrTooDeep, before any
// decoding.
func Canonical(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := limit.CheckJSONDepth(raw); err != nil {
		return nil, err
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonicalise arguments: %w", err)
	}
	if err := exactNumbers(raw); err != nil {
		return nil, err
	}
	return out, nil
}

// maxNumberLen bounds the length of a number in arguments: the longest
// exact decimal form of a double has 767 significant digits, but no
// number an agent sends needs more than this.
const maxNumberLen = 400

// ErrInexactNumber is the error of arguments with a number that the
// canonical form, which writes numbers as doubles, would change.
var ErrInexactNumber = errors.New("a number in the arguments is beyond what a double holds exactly; send it as a string")

// exactNumbers returns ErrInexactNumber when a number of the JSON value
// raw (valid JSON) has another value than the double it is written as in
// the canonical form.
func exactNumbers(raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("canonicalise arguments: %w", err)
		}
		n, ok := tok.(json.Number)
		if !ok {
			continue
		}
		if smallInteger(string(n)) {
			continue // the common case, without the exact comparison's cost
		}
		if len(n) > maxNumberLen {
			// No double needs so many digits, and comparing them
			// exactly costs time that grows with their square.
			return ErrInexactNumber
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return ErrInexactNumber
		}
		want, ok1 := new(big.Rat).SetString(string(n))
		got, ok2 := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
		if !ok1 || !ok2 || want.Cmp(got) != 0 {
			return ErrInexactNumber
		}
	}
}

// smallInteger reports whether the JSON number n is an integer of at most
// 15 digits, which a double holds exactly (2^53 has 16).
func smallInteger(n string) bool {
	digits := strings.TrimPrefix(n, "-")
	if len(digits) == 0 || len(digits) > 15 {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}

// Hash returns the hex SHA-256 of b.
func Hash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// HashArguments returns the argument hash of a binding: the SHA-256 of the
// canonical JSON of the arguments.
func HashArguments(raw json.RawMessage) (string, error) {
	c, err := Canonical(raw)
	if err != nil {
		return "", err
	}
	return Hash(c), nil
}

// Binding is what an approval of a call covers: its arguments in canonical
// form and their hash, and the preview the human reads and its hash. Every
// request's binding is made by Bind: the service's when it files a request
// or a retry takes one, and the MCP gateway's before it asks, in process
// or through a server.
type Binding struct {
	Args        json.RawMessage // canonical (RFC 8785)
	ArgsHash    string
	Preview     string
	PreviewHash string
}

// Bind makes the binding of a call of action with the arguments raw and
// the preview; an empty preview is the default one (DefaultPreview).
// Errors: those of Canonical (ErrInexactNumber, limit.ErrTooDeep, invalid
// JSON).
func Bind(action string, raw json.RawMessage, preview string) (Binding, error) {
	args, err := Canonical(raw)
	if err != nil {
		return Binding{}, err
	}
	if preview == "" {
		preview = DefaultPreview(action, args)
	}
	return Binding{Args: args, ArgsHash: Hash(args), Preview: preview, PreviewHash: Hash([]byte(preview))}, nil
}

// boundedArguments returns an agent's arguments in canonical form, at
// most maxArguments bytes of them. Errors: EINVALID.
func boundedArguments(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) > maxArguments {
		return nil, countersign.Errorf(countersign.EINVALID, "arguments must be at most %d bytes of JSON", maxArguments)
	}
	args, err := Canonical(raw)
	if err != nil {
		return nil, argumentsError(err)
	}
	return args, nil
}

// argumentsError is the EINVALID error of arguments Canonical refused.
func argumentsError(err error) error {
	if errors.Is(err, ErrInexactNumber) {
		return countersign.Errorf(countersign.EINVALID, "arguments: %v", ErrInexactNumber)
	} else if errors.Is(err, limit.ErrTooDeep) {
		return countersign.Errorf(countersign.EINVALID, "arguments: %v", limit.ErrTooDeep)
	}
	return countersign.Errorf(countersign.EINVALID, "arguments must be valid JSON")
}
