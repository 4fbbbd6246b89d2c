package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/limit"
)

// maxBody bounds every API body; a request with its preview and arguments
// fits well within it.
const maxBody = 64 << 10

// tooLarge is the error of a body over limit bytes.
func tooLarge(limit int64) error {
	return countersign.Errorf(countersign.ETOOLARGE, "the body must be at most %d bytes", limit)
}

// decodeJSON reads one JSON object into v: the body must be JSON, within
// maxBody, of the right types, with no unknown fields and nothing after it.
// An empty body is allowed only when emptyOK.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) error {
	body := http.MaxBytesReader(w, r.Body, maxBody)
	data, err := io.ReadAll(body)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return tooLarge(maxBody)
	} else if err != nil {
		return countersign.Errorf(countersign.EINVALID, "could not read the body")
	}
	if len(data) == 0 {
		if emptyOK {
			return nil
		}
		return countersign.Errorf(countersign.EINVALID, "the body must be a JSON object")
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return countersign.Errorf(countersign.EUNSUPPORTED, "send the body as Content-Type: application/json")
	}
	return decodeStrict(data, v)
}

// tooDeep is the error of a body nested deeper than limit.MaxJSONDepth.
func tooDeep() error {
	return countersign.Errorf(countersign.EINVALID, "the body nests objects and arrays deeper than the limit of %d levels", limit.MaxJSONDepth)
}

// decodeStrict decodes one JSON object with no unknown fields. A body
// nested deeper than limit.MaxJSONDepth is refused before it is decoded:
// no handler works on one.
func decodeStrict(data []byte, v any) error {
	if limit.CheckJSONDepth(data) != nil {
		return tooDeep()
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	// Only whitespace may follow: More is false before a closing
	// bracket, which would let "{…}]…" through with its tail.
	if _, err := dec.Token(); err != io.EOF {
		return countersign.Errorf(countersign.EINVALID, "the body must hold exactly one JSON object")
	}
	return nil
}

// jsonError turns a decoding error into a message that names the problem
// without echoing the body.
func jsonError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return countersign.Errorf(countersign.EINVALID, "the body is not valid JSON (at byte %d)", syntax.Offset)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return countersign.Errorf(countersign.EINVALID, "field %q must be %s", typ.Field, jsonType(typ.Type.Kind().String()))
		}
		return countersign.Errorf(countersign.EINVALID, "the body must be a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return countersign.Errorf(countersign.EINVALID, "the body is not valid JSON (it ends too early)")
	}
	var unknown string
	if _, e := fmt.Sscanf(err.Error(), "json: unknown field %q", &unknown); e == nil {
		return countersign.Errorf(countersign.EINVALID, "unknown field %q", unknown)
	}
	return countersign.Errorf(countersign.EINVALID, "the body is not valid JSON")
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "int", "int64", "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return "of another type"
}
