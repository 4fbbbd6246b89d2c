package server

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"strings"
	"time"
)

// deviceTTL is how long a device cookie lasts after the last sign-in with
// it.
const deviceTTL = 180 * 24 * time.Hour

// device is what a device cookie says: this browser signed in as that
// approver at that time. It is no credential (it opens nothing) but lets
// the browser's sign-ins go ahead of unknown ones and past the limits a
// flood of guesses from elsewhere sets off (OWASP's "device cookies").
type device struct {
	id       string // random, hex; the key of the device's own limit
	approver string
	issued   time.Time
}

// deviceCookieName follows the session cookie's: __Host- under https.
func (s *Server) deviceCookieName() string {
	if s.secure() {
		return "__Host-countersign_device"
	}
	return "countersign_device"
}

// deviceOf returns the device a request's cookie names, or nil when there
// is none, it is not ours or it has expired.
func (s *Server) deviceOf(r *http.Request, now time.Time) *device {
	c, err := r.Cookie(s.deviceCookieName())
	if err != nil || len(c.Value) > 512 {
		return nil
	}
	body, mac, ok := strings.Cut(c.Value, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(s.deviceMAC(body))) {
		return nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(raw) <= 24 {
		return nil
	}
	d := &device{
		id:       hex.EncodeToString(raw[:16]),
		issued:   time.Unix(int64(binary.BigEndian.Uint64(raw[16:24])), 0),
		approver: string(raw[24:]),
	}
	if now.Sub(d.issued) >= deviceTTL || d.issued.After(now.Add(time.Minute)) {
		return nil
	}
	return d
}

// deviceMAC signs a device cookie's body under the server's device key.
func (s *Server) deviceMAC(body string) string {
	m := hmac.New(sha256.New, s.deviceKey)
	m.Write([]byte("device\x00" + body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// setDeviceCookie marks the browser as one that signed in as approver. It
// keeps the device's id when the browser already was that approver's, so
// that its limit carries on; another approver's cookie is replaced.
func (s *Server) setDeviceCookie(w http.ResponseWriter, old *device, approver string, now time.Time) {
	raw := make([]byte, 24, 24+len(approver))
	if old != nil && old.approver == approver {
		hex.Decode(raw[:16], []byte(old.id))
	} else {
		rand.Read(raw[:16])
	}
	binary.BigEndian.PutUint64(raw[16:24], uint64(now.Unix()))
	raw = append(raw, approver...)
	body := base64.RawURLEncoding.EncodeToString(raw)
	http.SetCookie(w, &http.Cookie{
		Name: s.deviceCookieName(), Value: body + "." + s.deviceMAC(body), Path: "/",
		Expires: now.Add(deviceTTL), MaxAge: int(deviceTTL.Seconds()),
		HttpOnly: true, Secure: s.secure(), SameSite: http.SameSiteLaxMode,
	})
}
