package files

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/countersign/countersign/internal/seal"
)

// A blob is sealed in chunks, so that a file streams in and out without
// being held whole: an 8-byte random prefix, then each chunk of chunkSize
// plain bytes (the last one shorter, possibly empty) as AES-256-GCM
// ciphertext and tag. A chunk's nonce is the prefix and its number; the
// last one's additional data is marked, so that a blob cut at a chunk's end
// does not open.
const (
	chunkSize = 64 << 10
	tagSize   = seal.TagSize
	prefixLen = 8
)

// sealer seals with AES-256-GCM under a key of this process alone.
type sealer struct {
	key *seal.Key
}

func newSealer() (*sealer, error) {
	key, err := seal.NewRandom()
	if err != nil {
		return nil, err
	}
	return &sealer{key: key}, nil
}

func chunkNonce(prefix []byte, n uint32) []byte {
	nonce := make([]byte, seal.NonceSize)
	copy(nonce, prefix)
	binary.BigEndian.PutUint32(nonce[prefixLen:], n)
	return nonce
}

func chunkAD(ad []byte, last bool) []byte {
	out := append(append([]byte(nil), ad...), 0)
	if last {
		out[len(out)-1] = 1
	}
	return out
}

// blobWriter seals what is written to it, chunk by chunk, into a sink.
type blobWriter struct {
	s      *sealer
	ad     []byte
	prefix [prefixLen]byte
	n      uint32
	buf    []byte // plain text of the chunk being filled, with room for its tag
	sink   sink
	err    error
}

func (s *sealer) writer(ad []byte, k sink) (*blobWriter, error) {
	w := &blobWriter{s: s, ad: ad, buf: make([]byte, 0, chunkSize+tagSize), sink: k}
	rand.Read(w.prefix[:])
	if err := k.write(w.prefix[:]); err != nil {
		return nil, err
	}
	return w, nil
}

// Write fills chunks; a full chunk is sealed once more data comes, since
// only then is it known not to be the last.
func (w *blobWriter) Write(p []byte) (int, error) {
	done := 0
	for len(p) > 0 && w.err == nil {
		if len(w.buf) == chunkSize {
			w.flush(false)
			continue
		}
		n := copy(w.buf[len(w.buf):chunkSize], p)
		w.buf = w.buf[:len(w.buf)+n]
		p, done = p[n:], done+n
	}
	return done, w.err
}

func (w *blobWriter) flush(last bool) {
	sealed := w.s.key.SealAt(w.buf[:0], chunkNonce(w.prefix[:], w.n), w.buf, chunkAD(w.ad, last))
	if err := w.sink.write(sealed); err != nil {
		w.err = err
	}
	w.n++
	w.buf = w.buf[:0]
}

// close seals the last chunk and keeps the blob.
func (w *blobWriter) close() error {
	if w.err == nil {
		w.flush(true)
	}
	if w.err != nil {
		w.sink.abort()
		return w.err
	}
	return w.sink.commit()
}

// blobReader opens a sealed blob of size plain bytes chunk by chunk.
type blobReader struct {
	s       *sealer
	ad      []byte
	src     io.ReadCloser
	prefix  []byte
	n, last uint32
	buf     []byte
	out     []byte
	done    bool
}

func (s *sealer) reader(src io.ReadCloser, ad []byte, size int64) (*blobReader, error) {
	prefix := make([]byte, prefixLen)
	if _, err := io.ReadFull(src, prefix); err != nil {
		src.Close()
		return nil, errors.New("a sealed file is too short")
	}
	last := uint32(0)
	if size > 0 {
		last = uint32((size - 1) / chunkSize)
	}
	return &blobReader{s: s, ad: ad, src: src, prefix: prefix, last: last, buf: make([]byte, chunkSize+tagSize)}, nil
}

func (r *blobReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.done {
			return 0, io.EOF
		}
		if err := r.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// WriteTo writes each opened chunk as it is, without a copy: io.Copy to a
// response uses it.
func (r *blobReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if len(r.out) > 0 {
			n, err := w.Write(r.out)
			total += int64(n)
			r.out = r.out[n:]
			if err != nil {
				return total, err
			}
		}
		if r.done {
			return total, nil
		}
		if err := r.next(); err != nil {
			return total, err
		}
	}
}

func (r *blobReader) next() error {
	want := chunkSize + tagSize
	got, err := io.ReadFull(r.src, r.buf[:want])
	if r.n < r.last && got != want || err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return errors.New("a sealed file is cut short")
	}
	isLast := r.n == r.last
	plain, err := r.s.key.OpenAt(r.buf[:0], chunkNonce(r.prefix, r.n), r.buf[:got], chunkAD(r.ad, isLast))
	if err != nil {
		return fmt.Errorf("open a sealed file: %w", err)
	}
	r.n++
	r.out, r.done = plain, isLast
	return nil
}

func (r *blobReader) Close() error { return r.src.Close() }

// sink takes a blob's sealed bytes as they come.
type sink interface {
	write(p []byte) error
	commit() error
	abort()
}

// blobs keeps sealed bytes by record id.
type blobs interface {
	// create starts a blob of about size plain bytes.
	create(id string, size int64) (sink, error)
	open(id string) (io.ReadCloser, error)
	del(id string)
}

type memBlobs struct {
	mu sync.Mutex
	m  map[string][]byte
}

type memSink struct {
	b   *memBlobs
	id  string
	buf []byte
}

// create holds the whole sealed blob in one buffer of its final size, so
// that appending never copies it.
func (b *memBlobs) create(id string, size int64) (sink, error) {
	return &memSink{b: b, id: id, buf: make([]byte, 0, sealedSize(size))}, nil
}

// sealedSize is the size of a blob of size plain bytes: one tag a chunk,
// and at least one chunk.
func sealedSize(size int64) int64 {
	chunks := max((size+chunkSize-1)/chunkSize, 1)
	return prefixLen + size + chunks*tagSize
}

func (k *memSink) write(p []byte) error { k.buf = append(k.buf, p...); return nil }

func (k *memSink) commit() error {
	k.b.mu.Lock()
	k.b.m[k.id] = k.buf
	k.b.mu.Unlock()
	return nil
}

func (k *memSink) abort() { k.buf = nil }

func (b *memBlobs) open(id string) (io.ReadCloser, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[id]
	if !ok {
		return nil, os.ErrNotExist
	}
	return io.NopCloser(bytes.NewReader(v)), nil
}

func (b *memBlobs) del(id string) {
	b.mu.Lock()
	delete(b.m, id)
	b.mu.Unlock()
}

// diskBlobs keeps sealed bytes in a folder of its own, 0700, files 0600.
type diskBlobs struct{ dir string }

// openDiskBlobs empties and opens the folder. The caller holds the data
// directory's lock, so no other server uses it.
func openDiskBlobs(dir string) (*diskBlobs, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("empty the file folder %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the file folder %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	return &diskBlobs{dir: dir}, nil
}

func (b *diskBlobs) path(id string) string { return filepath.Join(b.dir, blobName(id)) }

type diskSink struct {
	f    *os.File
	path string
}

func (b *diskBlobs) create(id string, _ int64) (sink, error) {
	f, err := os.OpenFile(b.path(id)+".part", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	return &diskSink{f: f, path: b.path(id)}, nil
}

func (k *diskSink) write(p []byte) error {
	_, err := k.f.Write(p)
	return err
}

func (k *diskSink) commit() error {
	if err := k.f.Close(); err != nil {
		os.Remove(k.f.Name())
		return err
	}
	return os.Rename(k.f.Name(), k.path)
}

func (k *diskSink) abort() {
	k.f.Close()
	os.Remove(k.f.Name())
}

func (b *diskBlobs) open(id string) (io.ReadCloser, error) { return os.Open(b.path(id)) }

func (b *diskBlobs) del(id string) { os.Remove(b.path(id)) }
