package identity

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign"
	"golang.org/x/crypto/argon2"
)

// argon2id parameters after RFC 9106's second recommendation (64 MiB, 3
// passes), with one lane per core of a small server.
const (
	argonTime    = 3
	argonMemory  = 64 * 1024
	argonThreads = 2
	argonKeyLen  = 32
)

// argonKey is argon2.IDKey; tests count the computations through it.
var argonKey = argon2.IDKey

// argonCost is the cost of the hashes this binary makes. It is a string so
// that the end-to-end tests, which start many servers each hashing its
// first approver's password, can build the binary with "test" (-ldflags
// -X): one pass over 64 KiB. Releases keep "", the parameters above; no
// flag, variable or file changes it. A check costs what its hash says.
var argonCost = ""

// argonParams are the parameters of a new hash.
func argonParams() (passes, memory uint32, threads uint8) {
	if argonCost == "test" {
		return 1, 64, 1
	}
	return argonTime, argonMemory, argonThreads
}

// phcHash is an argon2id hash in the PHC string format.
func phcHash(passes, memory uint32, threads uint8, salt, key []byte) string {
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, memory, passes, threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// PasswordTurn is how a password check waits for its argon2id slot.
type PasswordTurn struct {
	// Slots are where the check waits; nil: the process's.
	Slots *HashSlots
	// Known puts the check ahead of every unknown one: the browser has
	// signed in as this approver before.
	Known bool
	// Wait bounds the wait for a slot (0: as long as the context lasts).
	Wait time.Duration
}

// idKey runs argonKey in one of the turn's slots, or returns ErrHashBusy
// or ctx's error if the turn's wait or ctx ends first.
func idKey(ctx context.Context, turn PasswordTurn, password, salt []byte, time, memory uint32, threads uint8, keyLen uint32) ([]byte, error) {
	slots := turn.Slots
	if slots == nil {
		slots = passwordSlots
	}
	if err := slots.Acquire(ctx, turn.Known, turn.Wait); err != nil {
		return nil, err
	}
	defer slots.Release()
	return argonKey(password, salt, time, memory, threads, keyLen), nil
}

// HashPassword returns the argon2id hash of a password in the PHC string
// format.
func HashPassword(password string) string {
	salt := make([]byte, 16)
	rand.Read(salt)
	passes, memory, threads := argonParams()
	key, _ := idKey(context.Background(), PasswordTurn{}, []byte(password), salt, passes, memory, threads, argonKeyLen)
	return phcHash(passes, memory, threads, salt, key)
}

// CheckPassword reports whether password matches a hash made by
// HashPassword, in constant time.
func CheckPassword(hash, password string) bool {
	ok, _ := CheckPasswordContext(context.Background(), hash, password)
	return ok
}

// CheckPasswordContext is CheckPassword that gives up, with ctx's error,
// when ctx ends while the check waits for its turn.
func CheckPasswordContext(ctx context.Context, hash, password string) (bool, error) {
	return CheckPasswordTurn(ctx, hash, password, PasswordTurn{})
}

// CheckPasswordTurn is CheckPassword that waits for its slot as turn says.
// Errors: ErrHashBusy, ctx's error.
func CheckPasswordTurn(ctx context.Context, hash, password string, turn PasswordTurn) (bool, error) {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, nil
	}
	var version int
	var memory, time uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, nil
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &time, &threads); err != nil {
		return false, nil
	}
	b64 := base64.RawStdEncoding
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return false, nil
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return false, nil
	}
	got, err := idKey(ctx, turn, []byte(password), salt, time, memory, threads, uint32(len(want)))
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// maxPassword bounds a password, well below what the sign-in form takes.
const maxPassword = 1024

// ValidPassword refuses a password an approver could not sign in with, or
// one too weak: 10 to maxPassword bytes, at least 10 characters.
func ValidPassword(password string) error {
	switch {
	case utf8.RuneCountInString(password) < 10:
		return countersign.Errorf(countersign.EINVALID, "the password must be at least 10 characters")
	case len(password) > maxPassword:
		return countersign.Errorf(countersign.EINVALID, "the password must be at most %d bytes", maxPassword)
	}
	return nil
}

// NewPassword returns a random password of 20 characters that is easy to
// type: lower-case letters and digits in groups of five.
func NewPassword() string {
	const alphabet = "abcdefghijkmnpqrstuvwxyz23456789"
	b := make([]byte, 20)
	rand.Read(b)
	var out strings.Builder
	for i, c := range b {
		if i > 0 && i%5 == 0 {
			out.WriteByte('-')
		}
		out.WriteByte(alphabet[int(c)%len(alphabet)])
	}
	return out.String()
}
