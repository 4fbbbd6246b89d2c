package files

import (
	"bytes"
	"encoding/hex"
	"io"
	"testing"

	"github.com/countersign/countersign/internal/seal"
)

// TestOpensStored: a record id and blobs sealed before the sealing moved
// to internal/seal, kept here as they were made, open: an id made by a
// replica of the old code still names its holder, and the chunked layout
// of a blob is unchanged.
func TestOpensStored(t *testing.T) {
	l, err := NewLocator(bytes.Repeat([]byte{0x45}, 32), "http://10.0.0.6:8080")
	if err != nil {
		t.Fatal(err)
	}
	const id = "i3bhdewhlrmkmy4egs3ba5k3hayxyslph2x4dscu4xmyksw3k5cohvohzjtcugn4vviifixlm3cvygagtwjhdsnrzkughx2rrm55j3q"
	if at, ok := l.where(id); !ok || at != "http://10.0.0.5:8080" {
		t.Fatalf("where = %q, %v", at, ok)
	}
	if _, ok := l.where(id[:len(id)-2] + "aa"); ok {
		t.Fatalf("a changed id names a replica")
	}

	key, err := seal.New(bytes.Repeat([]byte{0x46}, 32))
	if err != nil {
		t.Fatal(err)
	}
	s := &sealer{key: key}
	for _, tt := range []struct {
		size int64
		blob string
	}{
		{0, "cb8712c376925991a4c7c8a48edbbe472eec374142035f43"},
		{5, "239b4181fcfb283eb6501256f0a904c17c92132c34fed59f639f71023f"},
	} {
		blob, _ := hex.DecodeString(tt.blob)
		r, err := s.reader(io.NopCloser(bytes.NewReader(blob)), []byte("rec_1"), tt.size)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		want := []byte{0, 7, 14, 21, 28}[:tt.size]
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("blob of %d bytes: %x, %v", tt.size, got, err)
		}
		r, _ = s.reader(io.NopCloser(bytes.NewReader(blob)), []byte("rec_2"), tt.size)
		if _, err := io.ReadAll(r); err == nil {
			t.Fatalf("a blob of %d bytes opens as another record's", tt.size)
		}
	}
}
