package gateway

import (
	"container/list"
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The sessions of /mcp (clients of 2025-11-25 and older) hold memory for
// as long as they live: the SDK's session, its streams and their events.
// They are bounded:
//
//   - opening one (a POST without Mcp-Session-Id, which is initialize)
//     takes a token of the key's rate, as a call does (limit.go);
//   - an agent key has at most Sessions.PerKey live sessions. A new one
//     past that closes the key's own idle session first: one that never
//     made a call, else the one idle longest. A client that restarts
//     without DELETE leaves its old sessions behind, and must not lock its
//     key out until they time out; only when each of the key's sessions
//     has a request in flight is initialize refused (429);
//   - the server has at most Sessions.Max. Past that, the key's own idle
//     session makes room as above; a key with none gets 503: the server is
//     full, which is not that key's doing, and one key never closes
//     another's session;
//   - a session that made no call (no request or notification after
//     initialize) within unusedSession is closed; one that did keeps the
//     SDK's idle timeout of sessionIdle.
//
// Refusals are answered before the SDK creates anything, with a JSON-RPC
// error that says which limit and when to retry.
const (
	// DefaultSessionsPerKey is how many /mcp sessions one agent key may
	// keep open when the configuration sets no limit.
	DefaultSessionsPerKey = 64
	// DefaultSessions is how many /mcp sessions the server keeps open in
	// all when the configuration sets no limit.
	DefaultSessions = 4096
	unusedSession   = 3 * time.Minute
	sessionIdle     = 30 * time.Minute
	// busyRetry is the Retry-After of a key whose every session is busy.
	busyRetry = 5 * time.Second
	// fullRetry is the Retry-After of a full server when no session is
	// about to expire.
	fullRetry = time.Minute
)

// codeTooManySessions is the JSON-RPC error of an initialize refused
// because a session limit is reached (a server-defined code).
const codeTooManySessions = -32030

// SessionLimits bound the sessions of /mcp.
type SessionLimits struct {
	// PerKey is how many live sessions one agent key may have.
	PerKey int
	// Max is how many live sessions the server keeps in all.
	Max int
}

// fileSessions is the [sessions] table of a configuration file.
type fileSessions struct {
	PerKey *int `toml:"per_key"`
	Max    *int `toml:"max"`
}

// apply takes the limits a configuration file sets.
func (l *SessionLimits) apply(f fileSessions) error {
	if f.PerKey != nil {
		if l.PerKey = *f.PerKey; l.PerKey < 1 || l.PerKey > 100_000 {
			return fmt.Errorf("sessions.per_key %d must be a number of sessions from 1 to 100000", l.PerKey)
		}
	}
	if f.Max != nil {
		if l.Max = *f.Max; l.Max < 1 || l.Max > 1_000_000 {
			return fmt.Errorf("sessions.max %d must be a number of sessions from 1 to 1000000", l.Max)
		}
	}
	return nil
}

// sessionRegistry knows every live session of /mcp: its key, whether it
// made a call, how many of its requests are in flight. Every operation is
// O(1) but the choice of a key's idle session, which skips that key's busy
// ones (at most PerKey).
type sessionRegistry struct {
	mu     sync.Mutex
	byID   map[string]*liveSession
	keys   map[string]*keySessions
	unused list.List // never-used sessions of every key, oldest first
	// live are the registered sessions; pending the openings admitted and
	// not yet registered or ended.
	live, pending int
	limits        SessionLimits
	now           func() time.Time
	// unusedFor is unusedSession, but in tests.
	unusedFor time.Duration
	timer     *time.Timer // the next sweep of unused sessions; nil: none armed
}

// keySessions are the sessions of one agent key.
type keySessions struct {
	id            string
	live, pending int
	// converted counts openings registered before their request ended:
	// that request's end then releases nothing.
	converted int
	unused    list.List // never used, oldest first
	used      list.List // least recently active first
}

// closer closes a session; an *mcp.ServerSession.
type closer interface{ Close() error }

// liveSession is one session of the registry.
type liveSession struct {
	id     string
	key    *keySessions
	ss     closer // the SDK's session
	opened time.Time
	used   bool
	busy   int           // POSTs in flight
	inKey  *list.Element // in key.unused or key.used
	inAll  *list.Element // in the registry's unused; nil once used
}

// newSessionRegistry returns a registry with these limits; a limit of 0
// is the default one, never none.
func newSessionRegistry(limits SessionLimits, now func() time.Time) *sessionRegistry {
	if limits.PerKey <= 0 {
		limits.PerKey = DefaultSessionsPerKey
	}
	if limits.Max <= 0 {
		limits.Max = DefaultSessions
	}
	return &sessionRegistry{byID: map[string]*liveSession{}, keys: map[string]*keySessions{},
		limits: limits, now: now, unusedFor: unusedSession}
}

// refusal is an opening refused: the HTTP status, the message and when to
// retry.
type refusal struct {
	status int
	msg    string
	retry  time.Duration
}

// admit makes room for a new session of key and counts it as pending, or
// says why not. release ends the opening's request.
func (r *sessionRegistry) admit(key string) (release func(), no *refusal) {
	r.mu.Lock()
	now := r.now()
	closing := r.expire(now)
	k := r.key(key)
	for k.live+k.pending >= r.limits.PerKey || r.live+r.pending >= r.limits.Max {
		victim := k.idle()
		if victim == nil {
			break
		}
		r.remove(victim)
		closing = append(closing, victim.ss)
	}
	switch {
	case k.live+k.pending >= r.limits.PerKey:
		no = &refusal{status: http.StatusTooManyRequests, retry: busyRetry, msg: fmt.Sprintf(
			"countersign: this agent key has %d MCP sessions open, its limit, and each has a request in flight; "+
				"no session was opened. Close a session (DELETE /mcp) or retry after %d s.", r.limits.PerKey, seconds(busyRetry))}
	case r.live+r.pending >= r.limits.Max:
		retry := r.nextExpiry(now)
		no = &refusal{status: http.StatusServiceUnavailable, retry: retry, msg: fmt.Sprintf(
			"countersign: the server has %d MCP sessions open, its limit; no session was opened. Retry after %d s.",
			r.limits.Max, seconds(retry))}
	default:
		k.pending++
		r.pending++
	}
	r.forget(k)
	r.mu.Unlock()
	closeAll(closing)
	if no != nil {
		return nil, no
	}
	return func() { r.release(key) }, nil
}

// release ends an admitted opening's request.
func (r *sessionRegistry) release(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.key(key)
	if k.converted > 0 {
		k.converted--
	} else {
		k.pending--
		r.pending--
	}
	r.forget(k)
}

// opened registers a session whose initialize succeeded, in place of one
// of its key's pending openings.
func (r *sessionRegistry) opened(id string, ss closer, key string) {
	if id == "" || key == "" {
		return // stdio or stateless: no session to bound
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID[id] != nil {
		return
	}
	k := r.key(key)
	if k.pending > 0 {
		k.pending--
		r.pending--
		k.converted++
	}
	s := &liveSession{id: id, key: k, ss: ss, opened: r.now()}
	s.inKey = k.unused.PushBack(s)
	s.inAll = r.unused.PushBack(s)
	k.live++
	r.live++
	r.byID[id] = s
	r.arm()
}

// used notes that a session made a call: it is no longer closed as unused.
func (r *sessionRegistry) used(id string) {
	if id == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.byID[id]
	if s == nil || s.used {
		return
	}
	s.used = true
	s.key.unused.Remove(s.inKey)
	r.unused.Remove(s.inAll)
	s.inAll = nil
	s.inKey = s.key.used.PushBack(s)
}

// begin counts a request of key to session id as in flight until the
// returned function runs; a session of another key, or none, is not
// touched.
func (r *sessionRegistry) begin(id, key string) (end func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.byID[id]
	if s == nil || s.key.id != key {
		return func() {}
	}
	s.busy++
	r.touch(s)
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		s.busy--
		if r.byID[s.id] == s {
			r.touch(s)
		}
	}
}

// closed forgets a session the SDK closed (DELETE, its idle timeout, or
// a close of ours).
func (r *sessionRegistry) closed(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.byID[id]; s != nil {
		r.remove(s)
		r.forget(s.key)
	}
}

// count is the number of live sessions of key, and of all keys.
func (r *sessionRegistry) count(key string) (ofKey, all int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := r.keys[key]; k != nil {
		ofKey = k.live
	}
	return ofKey, r.live
}

// key returns the sessions of key, created when it has none. r.mu is held.
func (r *sessionRegistry) key(key string) *keySessions {
	k := r.keys[key]
	if k == nil {
		k = &keySessions{id: key}
		r.keys[key] = k
	}
	return k
}

// forget drops the entry of a key with nothing left. r.mu is held.
func (r *sessionRegistry) forget(k *keySessions) {
	if k.live == 0 && k.pending == 0 && k.converted == 0 {
		delete(r.keys, k.id)
	}
}

// touch makes s the key's most recently active session. r.mu is held.
func (r *sessionRegistry) touch(s *liveSession) {
	if s.used {
		s.key.used.MoveToBack(s.inKey)
	}
}

// remove takes s out of the registry. r.mu is held.
func (r *sessionRegistry) remove(s *liveSession) {
	delete(r.byID, s.id)
	if s.used {
		s.key.used.Remove(s.inKey)
	} else {
		s.key.unused.Remove(s.inKey)
		r.unused.Remove(s.inAll)
	}
	s.key.live--
	r.live--
}

// idle is the key's session to close for a new one: the oldest never
// used, else the one idle longest; never one with a request in flight.
// r.mu is held.
func (k *keySessions) idle() *liveSession {
	for _, l := range []*list.List{&k.unused, &k.used} {
		for e := l.Front(); e != nil; e = e.Next() {
			if s := e.Value.(*liveSession); s.busy == 0 {
				return s
			}
		}
	}
	return nil
}

// expire removes the sessions unused for unusedFor and returns them, to be
// closed once r.mu is released. r.mu is held.
func (r *sessionRegistry) expire(now time.Time) []closer {
	var out []closer
	for e := r.unused.Front(); e != nil; e = r.unused.Front() {
		s := e.Value.(*liveSession)
		if now.Sub(s.opened) < r.unusedFor {
			break
		}
		r.remove(s)
		r.forget(s.key)
		out = append(out, s.ss)
	}
	return out
}

// nextExpiry is how long until the oldest unused session expires, at
// least a second; fullRetry when none is unused. r.mu is held.
func (r *sessionRegistry) nextExpiry(now time.Time) time.Duration {
	e := r.unused.Front()
	if e == nil {
		return fullRetry
	}
	return max(e.Value.(*liveSession).opened.Add(r.unusedFor).Sub(now), time.Second)
}

// arm starts the timer that closes unused sessions once the oldest
// expires, unless one is running. Openings sweep too; the timer closes
// them when no opening comes. r.mu is held.
func (r *sessionRegistry) arm() {
	if r.timer != nil || r.unused.Len() == 0 {
		return
	}
	r.timer = time.AfterFunc(r.nextExpiry(r.now()), r.sweep)
}

// sweep closes the sessions unused for too long and arms the timer again.
func (r *sessionRegistry) sweep() {
	r.mu.Lock()
	r.timer = nil
	closing := r.expire(r.now())
	r.arm()
	r.mu.Unlock()
	closeAll(closing)
}

// closeAll closes sessions already out of the registry. A close waits for
// the session's requests in flight, which an idle session may still have
// (a call whose client went away): it never holds up the caller.
func closeAll(sessions []closer) {
	for _, ss := range sessions {
		go ss.Close()
	}
}

func seconds(d time.Duration) int { return int(math.Ceil(d.Seconds())) }

// trackSessions registers each session whose initialize succeeded, and
// notes every later request or notification as a call of its session.
func (g *Gateway) trackSessions(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, ok := req.GetSession().(*mcp.ServerSession)
		if !ok {
			return next(ctx, method, req)
		}
		switch method {
		case "initialize":
			res, err := next(ctx, method, req)
			if err == nil {
				if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
					g.sessions.opened(ss.ID(), ss, extra.TokenInfo.UserID)
				}
			}
			return res, err
		case "notifications/initialized":
		default:
			g.sessions.used(ss.ID())
		}
		return next(ctx, method, req)
	}
}
