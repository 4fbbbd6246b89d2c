package confirm

import (
	"sync"
	"time"

	"github.com/countersign/countersign/internal/gateway"
)

// recentAsks remembers the request last asked for each principal and call,
// so that a retry learns of a denial once, and the API backend finds the
// approval to take. It is a hint: losing it (a restart) only means asking
// again.
type recentAsks struct {
	mu sync.Mutex
	m  map[string]recentAsk
}

type recentAsk struct {
	id      string
	expires time.Time
}

func recentKey(p gateway.Principal, c *pendingCall) string {
	return p.ID + "\x00" + c.Tool + "\x00" + c.ArgsHash + "\x00" + c.PreviewHash
}

func (r *recentAsks) get(p gateway.Principal, c *pendingCall, now time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.m[recentKey(p, c)]
	if !ok || now.After(a.expires) {
		return ""
	}
	return a.id
}

func (r *recentAsks) put(p gateway.Principal, c *pendingCall, id string, expires time.Time, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) > 10000 { // bounded: drop what has expired
		for k, a := range r.m {
			if now.After(a.expires) {
				delete(r.m, k)
			}
		}
	}
	// Kept a while past the expiry, to tell a late retry what happened.
	r.m[recentKey(p, c)] = recentAsk{id: id, expires: expires.Add(ApprovalTTL)}
}

func (r *recentAsks) forget(p gateway.Principal, c *pendingCall) {
	r.mu.Lock()
	delete(r.m, recentKey(p, c))
	r.mu.Unlock()
}
