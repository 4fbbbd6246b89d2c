package notify

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"sync"
	"time"

	"github.com/countersign/countersign"
)

// WorkerConfig tunes the Worker. Zero values take the defaults.
type WorkerConfig struct {
	// Interval is how often the outbox is polled for due items (default
	// 1 s). Every replica polls; ClaimDue hands each item to one. A store
	// that is a countersign.OutboxWatcher also wakes the worker at once
	// when items are added; the poll then finds retries that came due and
	// whatever a wake-up missed.
	Interval time.Duration
	// Batch is how many items one poll claims at most (default 10); they
	// are sent at once.
	Batch int
	// SendTimeout bounds one attempt (default 30 s).
	SendTimeout time.Duration
	// Lease is how long a claimed item is held before another sender may
	// take it over (default 2 min). It must exceed SendTimeout, or a slow
	// attempt could be repeated by another replica.
	Lease time.Duration
	// MaxAttempts is how many attempts an item gets before it is given up
	// (default 10).
	MaxAttempts int
	// BaseDelay is the wait after the first failure; each further failure
	// doubles it (default 15 s), up to MaxDelay (default 20 min): ten
	// attempts span about an hour.
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// Retention is how long sent and failed items are kept for
	// `countersign notify status` (default 30 days).
	Retention time.Duration
}

func (c *WorkerConfig) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Interval, time.Second)
	def(&c.SendTimeout, 30*time.Second)
	def(&c.Lease, 2*time.Minute)
	def(&c.BaseDelay, 15*time.Second)
	def(&c.MaxDelay, 20*time.Minute)
	def(&c.Retention, 30*24*time.Hour)
	if c.Lease <= c.SendTimeout {
		c.Lease = c.SendTimeout + time.Minute
	}
	if c.Batch <= 0 {
		c.Batch = 10
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 10
	}
}

// Worker delivers the outbox: it claims due items, sends them, and marks
// each sent, due again after a backoff, or failed after its last attempt.
type Worker struct {
	store    countersign.Store
	delivery *Delivery
	clock    countersign.Clock
	log      *slog.Logger
	cfg      WorkerConfig
	keys     *keyring
}

// NewWorker returns a worker. A nil clock is the system clock; a nil logger
// discards.
func NewWorker(store countersign.Store, d *Delivery, clock countersign.Clock, log *slog.Logger, cfg WorkerConfig) *Worker {
	cfg.setDefaults()
	if clock == nil {
		clock = countersign.SystemClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Worker{store: store, delivery: d, clock: clock, log: log, cfg: cfg, keys: &keyring{store: store}}
}

// Run delivers until ctx is done. Attempts under way when ctx ends are
// finished (within SendTimeout) and recorded before Run returns, so that a
// shutdown neither repeats nor loses them.
func (w *Worker) Run(ctx context.Context) {
	tick := time.NewTicker(w.cfg.Interval)
	defer tick.Stop()
	// Watched before the first claim, so that an item committed after it
	// began is never left to the poll.
	var added <-chan struct{}
	if ow, ok := w.store.(countersign.OutboxWatcher); ok {
		var stop func()
		added, stop = ow.WatchOutbox()
		defer stop()
	}
	var lastPurge time.Time
	for {
		for {
			n, err := w.RunOnce(ctx)
			if err != nil && ctx.Err() == nil {
				w.log.Error("deliver notifications", "err", err)
			}
			// A full batch suggests more are due: go on without waiting.
			if n < w.cfg.Batch || ctx.Err() != nil {
				break
			}
		}
		if now := w.clock.Now(); now.Sub(lastPurge) >= time.Hour {
			lastPurge = now
			w.purge(ctx, now)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-added:
		}
	}
}

func (w *Worker) purge(ctx context.Context, now time.Time) {
	n, err := w.store.PurgeOutbox(ctx, now.Add(-w.cfg.Retention))
	if err != nil && ctx.Err() == nil {
		w.log.Error("purge old notifications", "err", err)
	} else if n > 0 {
		w.log.Info("purged old notifications", "count", n)
	}
}

// RunOnce claims the items due now, sends them concurrently and records
// each outcome. It returns how many it claimed.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	items, err := w.store.ClaimDue(ctx, w.clock.Now(), w.cfg.Batch, w.cfg.Lease)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Go(func() { w.deliver(ctx, it) })
	}
	wg.Wait()
	return len(items), nil
}

// errSkip is the outcome of an announcement whose request was decided
// before it could be sent: nobody needs its buttons any more.
var errSkip = errors.New("the request no longer waits")

// deliver makes one attempt and records it. The attempt and its record run
// on their own context: once claimed, an item is always accounted for.
func (w *Worker) deliver(ctx context.Context, it *countersign.OutboxItem) {
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.SendTimeout)
	defer cancel()
	ch, err := w.send(sendCtx, it)
	name := ""
	if ch != nil {
		name = ch.Name
	}
	log := w.log.With("item", it.ID, "channel", name, "event", it.Event, "request", it.RequestID, "attempt", it.Attempts)
	if err != nil && !errors.Is(err, errSkip) {
		// What reaches the log and the outbox is the scrubbed text: a
		// receiver or an SMTP server may echo a link's token or a
		// secret in what it answers.
		err = scrubbed{err}
	}
	now := w.clock.Now()
	rec := context.WithoutCancel(ctx)
	switch {
	case err == nil || errors.Is(err, errSkip):
		if err != nil {
			log.Info("notification skipped: the request no longer waits")
		} else {
			log.Info("notification sent")
		}
		err = w.store.MarkSent(rec, it.ID, it.Claim, now)
	case isPermanent(err) || it.Attempts >= w.cfg.MaxAttempts:
		log.Error("notification failed; giving up", "err", err)
		err = w.store.MarkFailed(rec, it.ID, it.Claim, now, time.Time{}, errText(err))
	default:
		next := now.Add(w.backoff(it.Attempts))
		log.Warn("notification failed; will retry", "err", err, "next_attempt_at", next)
		err = w.store.MarkFailed(rec, it.ID, it.Claim, now, next, errText(err))
	}
	if err != nil {
		log.Error("record the outcome of a notification", "err", err)
	}
}

// send renders and sends one item and returns its channel.
func (w *Worker) send(ctx context.Context, it *countersign.OutboxItem) (*countersign.Channel, error) {
	ch, err := w.store.Channel(ctx, it.ChannelID)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return nil, permanent(err)
	} else if err != nil {
		return nil, err
	}
	p, err := w.keys.openPayload(ctx, it)
	if err != nil {
		return ch, permanent(err)
	}
	secret, err := w.keys.openSecret(ctx, ch)
	if err != nil {
		return ch, permanent(err)
	}
	m, err := w.message(ctx, it, ch, p)
	if err != nil {
		return ch, err
	}
	if it.Event == countersign.EventCreated && m.Request.Status != countersign.StatusPending {
		return ch, errSkip
	}
	return ch, w.delivery.Send(ctx, ch, secret, m)
}

// message reads the request and account of an item and builds its message.
func (w *Worker) message(ctx context.Context, it *countersign.OutboxItem, ch *countersign.Channel, p payload) (*Message, error) {
	r, err := w.store.Request(ctx, it.RequestID)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return nil, permanent(err)
	} else if err != nil {
		return nil, err
	}
	acc, err := w.store.Account(ctx, it.AccountID)
	if err != nil {
		return nil, err
	}
	public := w.delivery.publicURL()
	m := &Message{
		Event: it.Event, DeliveryID: it.ID, Account: acc.Name, Channel: ch.Name, Request: r,
		InboxURL: inboxURL(public, r.ID), Now: w.clock.Now(),
	}
	if len(p.Links) > 0 {
		m.Links = make(map[string]string, len(p.Links))
		for action, token := range p.Links {
			m.Links[action] = linkURL(public, token)
		}
	}
	return m, nil
}

// backoff is the wait after the attempt-th failure: BaseDelay doubled for
// each earlier failure, at most MaxDelay, plus up to a tenth more so that
// the items of a receiver that was down do not all return at once.
func (w *Worker) backoff(attempt int) time.Duration {
	d := w.cfg.BaseDelay
	for i := 1; i < attempt && d < w.cfg.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, w.cfg.MaxDelay)
	return d + rand.N(d/10+1)
}

// scrubbed is an error whose text has every long token-like run of
// characters (a link's token, a secret a remote server echoed) cut out.
// Is and As see the error underneath.
type scrubbed struct{ err error }

func (s scrubbed) Error() string { return secretLike.ReplaceAllString(s.err.Error(), "[…]") }
func (s scrubbed) Unwrap() error { return s.err }

// secretLike matches what could be a token or a secret: 24 or more letters,
// digits, '_', '-', '+' or '/' in a row (base64 with its padding included),
// longer than the words of an error. A long host label is cut too.
var secretLike = regexp.MustCompile(`[A-Za-z0-9_+/-]{24,}={0,2}`)

// errText is an error as the outbox keeps it: short enough for a status
// line. Errors never hold a token (see Delivery.do).
func errText(err error) string {
	s := err.Error()
	if len(s) > 500 {
		s = truncateUTF8(s, 500) + "…"
	}
	return s
}
