package server_test

import (
	"net/http"
	"testing"

	"github.com/countersign/countersign"
)

// TestOtherKeysSeeNothing: a request of key A is unknown to key B of the same
// account, to a key of another account, and to another account's approver,
// on every route; the answer is the one for an id that does not exist, and
// nothing changes.
func TestOtherKeysSeeNothing(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	pending := s.create(s.KeyA)
	approved := s.create(s.KeyA)
	s.decide(approved.ID, "approve")
	unknown := s.call("GET", "/api/v1/requests/req_doesnotexist", s.KeyA, "").wantError(t, "unknown id", http.StatusNotFound, countersign.ENOTFOUND)
	before := s.snapshot()

	routes := []struct{ method, path, body string }{
		{"GET", "/api/v1/requests/" + pending.ID, ""},
		{"GET", "/api/v1/requests/" + pending.ID + "?wait=5s", ""},
		{"GET", "/api/v1/requests/" + approved.ID, ""},
		{"POST", "/api/v1/requests/" + approved.ID + "/consume", ""},
		{"POST", "/api/v1/requests/" + pending.ID + "/cancel", ""},
		{"POST", "/api/v1/requests/" + pending.ID + "/cancel", "{}"},
	}
	for _, key := range []struct{ name, cred string }{{"key B", s.keyB}, {"other account's key", s.KeyX}} {
		for _, rt := range routes {
			what := key.name + ": " + rt.method + " " + rt.path
			msg := s.call(rt.method, rt.path, key.cred, rt.body).wantError(t, what, http.StatusNotFound, countersign.ENOTFOUND)
			if msg != unknown {
				t.Errorf("%s: message %q differs from an unknown id's %q", what, msg, unknown)
			}
		}
	}
	for _, id := range []string{pending.ID, pending.Reference, approved.ID} {
		msg := s.call("POST", "/api/v1/requests/"+id+"/decision", s.bob, `{"decision":"approve"}`).wantError(t, "bob decides "+id, http.StatusNotFound, countersign.ENOTFOUND)
		if msg != unknown {
			t.Errorf("bob decides %s: message %q differs from an unknown id's %q", id, msg, unknown)
		}
	}
	s.unchanged("calls by other keys and accounts", before)

	// The owner still can.
	s.call("POST", "/api/v1/requests/"+approved.ID+"/consume", s.KeyA, "").request(t, http.StatusOK)
	s.call("POST", "/api/v1/requests/"+pending.ID+"/cancel", s.KeyA, "").request(t, http.StatusOK)
}
