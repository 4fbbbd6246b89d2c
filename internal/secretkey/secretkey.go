// Package secretkey reads and makes the server's secret key file.
//
// The file holds 32 random bytes as 64 hexadecimal characters on one line
// (a final newline and surrounding spaces are allowed, nothing else), such
// as `openssl rand -hex 32` prints. It must be a regular file readable by
// its owner only (mode 0600 or 0400): a file that the group or others may
// read is refused. A symbolic link to such a file is read (secrets mounts,
// Kubernetes' among them, are links), but a new file is never made through
// one. The key never leaves this package but as a countersign.SecretKey,
// and no message holds it.
package secretkey

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/countersign/countersign"
)

// FileName is the name of the key file beside the data when no other path
// is configured.
const FileName = "secret.key"

// maxFile bounds what Load reads: a key file is 65 bytes.
const maxFile = 4096

// Load reads the key file at path. Errors wrap fs.ErrNotExist when there is
// no file.
func Load(path string) (*countersign.SecretKey, error) {
	// The checks are on the open file, so that what was checked is
	// what is read.
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the secret key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read the secret key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("the secret key file %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the secret key file %s is open to others (mode %04o): it unlocks every key of the store; run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("read the secret key file: %w", err)
	}
	return parse(path, b)
}

// parse decodes the contents of a key file; the message never shows them.
func parse(path string, b []byte) (*countersign.SecretKey, error) {
	b = bytes.TrimSpace(b)
	raw := make([]byte, countersign.SecretKeySize)
	if len(b) != hex.EncodedLen(len(raw)) {
		return nil, fmt.Errorf("the secret key file %s does not hold a key: it must hold 64 hexadecimal characters (32 random bytes, as openssl rand -hex 32 prints)", path)
	}
	if _, err := hex.Decode(raw, b); err != nil {
		return nil, fmt.Errorf("the secret key file %s does not hold a key: it must hold 64 hexadecimal characters (32 random bytes, as openssl rand -hex 32 prints)", path)
	}
	return countersign.NewSecretKey(raw)
}

// Create draws a new key and writes it to a new file at path, mode 0600,
// and returns it. It never replaces a file: an existing one (or a link
// there) fails with an error wrapping fs.ErrExist. The directory must
// exist.
func Create(path string) (*countersign.SecretKey, error) {
	raw := make([]byte, countersign.SecretKeySize)
	rand.Read(raw)
	return write(path, raw)
}

// Copy writes the key of the file at from to a new file at to, as Create
// does, so that a copy of a store gets the key file it opens with.
func Copy(from, to string) error {
	if _, err := Load(from); err != nil {
		return err
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("read the secret key file: %w", err)
	}
	raw, err := hex.DecodeString(string(bytes.TrimSpace(b)))
	if err != nil {
		return fmt.Errorf("the secret key file %s does not hold a key", from)
	}
	_, err = write(to, raw)
	return err
}

func write(path string, raw []byte) (*countersign.SecretKey, error) {
	key, err := countersign.NewSecretKey(raw)
	if err != nil {
		return nil, err
	}
	// O_EXCL with O_NOFOLLOW: a file or link someone put there is never
	// written through. The mode is set again after creation, whatever the
	// umask made of it.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create the secret key file: %w", err)
	}
	werr := f.Chmod(0o600)
	if werr == nil {
		werr = ownLikeDir(f, filepath.Dir(path))
	}
	if werr == nil {
		_, werr = f.Write([]byte(hex.EncodeToString(raw) + "\n"))
	}
	if werr == nil {
		werr = f.Sync()
	}
	if err := errors.Join(werr, f.Close()); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("write the secret key file: %w", err)
	}
	syncDir(filepath.Dir(path))
	return key, nil
}

// syncDir makes the new file's name durable, so that a crash right after
// the store was sealed does not lose the key.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// IsNotExist reports whether err is the error of a missing key file.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
