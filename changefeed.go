package countersign

import (
	"context"
	"time"
)

// ChangeFeed is implemented by a store that several server replicas share
// and that can tell each of them about the changes the others commit (the
// PostgreSQL store, through LISTEN/NOTIFY). A store used by one process
// alone does not implement it: the approval service rings its own hub.
type ChangeFeed interface {
	// Listen calls onChange for every committed change of a request (its
	// creation, a transition, its expiry) made through any other store
	// value on the same database (another replica, a command), and blocks
	// until ctx is done. The changes made through this store value are
	// left to its callers, which ring their own waiters with the request
	// as committed (approval.Service does).
	// When the feed was interrupted (the database restarted, the
	// connection dropped) it reconnects by itself and, once listening
	// again, calls onResync, because changes committed in the gap were not
	// announced: waiters must re-read the store. onResync is also called
	// once the first time listening starts. The callbacks run on Listen's
	// goroutine and must not block. Listen returns nil when ctx is done,
	// and an error only when listening cannot work at all.
	Listen(ctx context.Context, onChange func(requestID, accountID string), onResync func()) error
}

// TeamsFingerprints is implemented by a store that records the fingerprint
// of the teams configuration its servers decide under (see
// approval.Teams.Fingerprint). Every server writes its own at start; on a
// store that replicas share, a replica decides only while the store holds
// its own, so that replicas started with different teams files never
// decide at once.
type TeamsFingerprints interface {
	// SetTeamsFingerprint records fp, returning the fingerprint recorded
	// before ("" when there was none).
	SetTeamsFingerprint(ctx context.Context, fp string, at time.Time) (previous string, err error)
	// TeamsFingerprint returns the recorded fingerprint ("" when there is
	// none). A store that replicas share keeps it while its change feed
	// listens, and reads it again as soon as the feed hears of a change;
	// without the feed, it reads it every time.
	TeamsFingerprint(ctx context.Context) (string, error)
}
