package main

import (
	"encoding/json"
	"testing"
)

// TestScanAnswer: the id and status of an answer, and refusals of what is
// not a request.
func TestScanAnswer(t *testing.T) {
	for _, c := range []struct {
		body, id, status string
		ok               bool
	}{
		{requestBody("req_a", "pending"), "req_a", "pending", true},
		{` { "status" : "consumed" , "id" : "req_\u0062" } `, "req_b", "consumed", true},
		{`{"a":{"id":"x","status":[1,{"y":"}"}]},"id":"req_c","b":"\"id\":\"no\"","status":"approved"}`, "req_c", "approved", true},
		{`{"id":"req_a","id":"req_d","\u0073tatus":"denied"}`, "req_d", "denied", true},
		{`{"ID":"req_a","Status":"pending"}`, "", "", true}, // names match exactly
		{`{}`, "", "", true},
		{`{"id":7,"status":"pending"}`, "", "", false},
		{`{"id":"req_a","status":null}`, "", "", false},
		{`{"id":"req_a","status":"pending"`, "", "", false},
		{`{"id":"req_a","status":"pending"} {}`, "", "", false},
		{`{"id":"req_a",}`, "", "", false},
		{`null`, "", "", false},
		{`["req_a"]`, "", "", false},
		{``, "", "", false},
	} {
		a, err := scanAnswer([]byte(c.body))
		if (err == nil) != c.ok || a.ID != c.id || a.Status != c.status {
			t.Errorf("scanAnswer(%s) = %+v, %v; want %q %q ok=%v", c.body, a, err, c.id, c.status, c.ok)
		}
	}
}

// FuzzScanAnswer compares scanAnswer with encoding/json: both accept the
// same documents and read the same id and status.
func FuzzScanAnswer(f *testing.F) {
	for _, s := range []string{
		requestBody("req_a", "pending"), `{"id":"a\u00e9\ud83d\ude00","status":"x\"y"}`, `{"id":"\xff","status":""}`,
		`{"a":[{"b":"]"},-1.5e3,true,null],"id":"q"}`, `{"id":"a","id":null}`, `{"id":null,"id":"b"}`, ` {"status" :"s"}  `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := scanAnswer(body)
		want, ok := referenceAnswer(body)
		if (err == nil) != ok || got != want {
			t.Errorf("scanAnswer(%q) = %+v, %v; encoding/json reads %+v ok=%v", body, got, err, want, ok)
		}
	})
}

// referenceAnswer reads the answer with encoding/json, by exact names.
func referenceAnswer(body []byte) (answer, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return answer{}, false
	}
	var a answer
	for name, dst := range map[string]*string{"id": &a.ID, "status": &a.Status} {
		if raw, ok := m[name]; ok && (raw[0] != '"' || json.Unmarshal(raw, dst) != nil) {
			return answer{}, false
		}
	}
	return a, true
}

func BenchmarkScanAnswer(b *testing.B) {
	body := []byte(requestBody("req_01JABCDEFGHJKMNPQRSTVWXYZ0", "approved"))
	for b.Loop() {
		if _, err := scanAnswer(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalAnswer(b *testing.B) {
	body := []byte(requestBody("req_01JABCDEFGHJKMNPQRSTVWXYZ0", "approved"))
	for b.Loop() {
		var a answer
		if err := json.Unmarshal(body, &a); err != nil {
			b.Fatal(err)
		}
	}
}
