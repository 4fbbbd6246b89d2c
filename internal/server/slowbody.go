package server

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// errSlowBody is a body that broke the BodyLimits.
var errSlowBody = errors.New("the body came in too slowly")

// slowBody reads a request body under BodyLimits, with read deadlines on
// the connection, so that a stalled client is cut off by the network and
// not only when it sends again. It runs on the wall clock: these are the
// connection's deadlines.
type slowBody struct {
	r     io.Reader
	rc    *http.ResponseController
	lim   BodyLimits
	start time.Time
	set   time.Time // when the read deadline was last moved
	n     int64
	err   error
}

func newSlowBody(w http.ResponseWriter, r io.Reader, lim BodyLimits) *slowBody {
	b := &slowBody{r: r, rc: http.NewResponseController(w), lim: lim, start: time.Now()}
	// The server's write timeout counts from the request's start: the
	// answer comes after the body.
	_ = b.rc.SetWriteDeadline(b.start.Add(lim.Total + 10*time.Second))
	return b
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	now := time.Now()
	end := b.start.Add(b.lim.Total)
	if !now.Before(end) {
		b.err = errSlowBody
		return 0, b.err
	}
	// The deadline moves at most every 100 ms: setting it on every
	// small read costs more than the read.
	if now.Sub(b.set) >= 100*time.Millisecond || b.set.IsZero() {
		dl := now.Add(b.lim.Stall)
		if dl.After(end) {
			dl = end
		}
		_ = b.rc.SetReadDeadline(dl)
		b.set = now
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if err != nil && timeout(err) {
		b.err = errSlowBody
		return n, b.err
	}
	if since := time.Since(b.start); since > b.lim.Grace && float64(b.n) < float64(b.lim.MinRate)*since.Seconds() && err != io.EOF {
		b.err = errSlowBody
		return n, b.err
	}
	return n, err
}

func timeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
