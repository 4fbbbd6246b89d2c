package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// The signin-flood scenario: --flood-addrs client addresses (127.0.1.1,
// 127.0.1.2, …, each a source address of its own on the loopback, so that
// the server counts them apart without trusting any proxy) send
// --flood-attempts wrong passwords each at once, within the per-address
// limit: for the admin, or with --flood-user "" each address for a name
// of its own, which no per-username limit cuts short. While their checks are queued, two browsers sign in
// as the admin with the right password from fresh addresses: a known one,
// which signed in before the flood (and keeps the cookies it was given,
// but not its session), and an unknown one. Reported: how long each took
// to get an answer, and what the answer was (303: signed in; 429: told to
// come back; 0: no answer, the connection was cut).

// browser is one client address with the cookies it was given.
type browser struct {
	c       *http.Client
	cookies []*http.Cookie
}

// newBrowser returns a client whose connections leave from ip.
func newBrowser(ip string) *browser {
	d := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{Proxy: nil, DialContext: d.DialContext, MaxIdleConnsPerHost: 8, DisableCompression: true}
	return &browser{c: &http.Client{
		Transport:     tr,
		Timeout:       90 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// signIn posts the sign-in form as the inbox's own page would and returns
// the status (0 when the connection failed or was cut) and the time to
// the answer's end.
func (b *browser) signIn(ctx context.Context, s *server, username, password string) (int, time.Duration, error) {
	form := url.Values{"username": {username}, "password": {password}, "next": {"/approvals"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/signin", strings.NewReader(form.Encode()))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.base)
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	start := time.Now()
	resp, err := b.c.Do(req)
	if err != nil {
		return 0, time.Since(start), nil
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, time.Since(start), nil
	}
	took := time.Since(start)
	for _, c := range resp.Cookies() {
		// A browser keeps what it is given; the session itself is left
		// out, as if it had ended.
		if !strings.Contains(c.Name, "session") && c.MaxAge >= 0 {
			b.cookies = append(slices.DeleteFunc(b.cookies, func(x *http.Cookie) bool { return x.Name == c.Name }), c)
		}
	}
	return resp.StatusCode, took, nil
}

type floodResult struct {
	status int
	took   time.Duration
}

func runSigninFlood(ctx context.Context, o *options, s *server, out *printer) error {
	if s.password == "" {
		return fmt.Errorf("the server printed no admin password on first start")
	}
	known := newBrowser("127.0.0.2")
	if st, _, err := known.signIn(ctx, s, "admin", s.password); err != nil || st != http.StatusSeeOther {
		return fmt.Errorf("the known browser's first sign-in: status %d, %v", st, err)
	}
	out.comment("known browser's cookies besides the session: %d", len(known.cookies))

	results := make(chan floodResult, o.floodAddrs*o.floodAttempts)
	var wg sync.WaitGroup
	start := time.Now()
	for a := range o.floodAddrs {
		b := newBrowser(fmt.Sprintf("127.0.1.%d", a+1))
		user := o.floodUser
		if user == "" {
			user = fmt.Sprintf("guess-%d", a+1)
		}
		for range o.floodAttempts {
			wg.Go(func() {
				st, took, _ := b.signIn(ctx, s, user, "not the password, a guess")
				results <- floodResult{st, took}
			})
		}
	}
	// Let the flood's checks queue up before the browsers come.
	select {
	case <-time.After(o.floodLead):
	case <-ctx.Done():
		return ctx.Err()
	}
	var kr, ur floodResult
	var mw sync.WaitGroup
	mw.Go(func() { kr.status, kr.took, _ = known.signIn(ctx, s, "admin", s.password) })
	mw.Go(func() { ur.status, ur.took, _ = newBrowser("127.0.0.3").signIn(ctx, s, "admin", s.password) })
	mw.Wait()
	wg.Wait()
	floodTook := time.Since(start)
	close(results)

	byStatus := map[int]int64{}
	var lat []time.Duration
	for r := range results {
		byStatus[r.status]++
		lat = append(lat, r.took)
	}
	out.ms("known_signin", kr.took)
	out.count("known_signin_status", int64(kr.status))
	out.ms("unknown_answer", ur.took)
	out.count("unknown_answer_status", int64(ur.status))
	out.ms("flood_duration", floodTook)
	for _, st := range slices.Sorted(maps.Keys(byStatus)) {
		out.count(fmt.Sprintf("flood_status_%d", st), byStatus[st])
	}
	slices.Sort(lat)
	out.ms("flood_answer_p50", lat[len(lat)/2])
	out.ms("flood_answer_max", lat[len(lat)-1])
	return s.alive()
}
