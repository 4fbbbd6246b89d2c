package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/countersign/countersign"
)

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// idempotencyKey reads the Idempotency-Key header: "" when there is none,
// else 1 to 255 visible ASCII characters.
func idempotencyKey(r *http.Request) (string, error) {
	k := r.Header.Get("Idempotency-Key")
	if k == "" {
		return "", nil
	}
	if len(k) > maxIdempotencyKey {
		return "", countersign.Errorf(countersign.EINVALID, "Idempotency-Key must be at most %d characters", maxIdempotencyKey)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return "", countersign.Errorf(countersign.EINVALID, "Idempotency-Key must be visible ASCII characters, such as a UUID")
		}
	}
	return k, nil
}

// dropAfterCommit, set by tests only (export_test.go), drops the
// connection of a change that has been committed, before its answer: the
// lost reply that a retry with the same Idempotency-Key must recover.
var dropAfterCommit func(r *http.Request) bool

// change is a change of a request the API makes: the request it left and
// the status to answer.
type change func(ctx context.Context) (*countersign.Request, int, error)

// idempotent runs do and answers its request. With an Idempotency-Key, a
// retry from the same principal within a day gets the first answer again
// and changes nothing; the key with another change or body gets 409. The
// key is recorded in the change's own transaction, so a change whose
// answer was lost is found by its retry, and a change that failed left no
// record. in is the decoded body, op and target what it changes.
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, principal, op, target string, in any, do change) error {
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	var idem *countersign.Idempotency
	if key != "" {
		body, err := json.Marshal(in)
		if err != nil {
			return err
		}
		sum := sha256.Sum256([]byte(op + "\x00" + target + "\x00" + string(body)))
		idem = &countersign.Idempotency{Principal: principal, Key: key, Op: op, Fingerprint: hex.EncodeToString(sum[:])}
		if done, err := s.replay(w, r, idem); done || err != nil {
			return err
		}
		ctx = countersign.WithIdempotency(ctx, idem)
	}
	req, status, err := do(ctx)
	if err != nil && idem != nil {
		// A call with the same key may have made the change meanwhile:
		// its answer is this one's.
		if done, rerr := s.replay(w, r, idem); done || rerr != nil {
			return rerr
		}
	}
	if err != nil {
		return err
	}
	if dropAfterCommit != nil && dropAfterCommit(r) {
		panic(http.ErrAbortHandler) // closes the connection, unanswered
	}
	writeJSON(w, status, s.requestJSON(req))
	return nil
}

// replay answers again the change recorded for idem's key, and reports
// whether there was one. The key with another change or body is a
// conflict.
func (s *Server) replay(w http.ResponseWriter, r *http.Request, idem *countersign.Idempotency) (bool, error) {
	res, err := s.service.Idempotent(r.Context(), idem.Principal, idem.Key)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if res.Op != idem.Op || res.Fingerprint != idem.Fingerprint {
		return false, countersign.Errorf(countersign.ECONFLICT, "this Idempotency-Key was used for another request; use a new key for a new request")
	}
	status := http.StatusOK
	if res.Op == countersign.IdemCreate && res.Created {
		status = http.StatusCreated
	}
	w.Header().Set("Idempotent-Replayed", "true")
	writeJSON(w, status, s.requestJSON(res.Request))
	return true, nil
}

// agentPrincipal and approverPrincipal name whose keys are whose.
func agentPrincipal(a countersign.Agent) string { return "key:" + a.KeyID }

func approverPrincipal(ap countersign.ApproverPrincipal) string {
	return "approver:" + ap.ApproverID + "@" + ap.AccountID
}
