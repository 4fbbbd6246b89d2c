package countersign

import (
	"bytes"
	"errors"
	"testing"
)

func TestServerKeyRules(t *testing.T) {
	k, err := NewSecretKey(bytes.Repeat([]byte{7}, SecretKeySize))
	if err != nil {
		t.Fatal(err)
	}
	raw := bytes.Repeat([]byte{1}, 32)
	sealed, err := k.SealServerKey("session", raw)
	if err != nil {
		t.Fatalf("SealServerKey: %v", err)
	}
	if _, err := k.SealServerKey("session", sealed); !errors.Is(err, ErrCheckRemoved) {
		t.Errorf("SealServerKey of a sealed key: %v, want ErrCheckRemoved", err)
	}
	if got, err := OpenServerKey(k, "session", sealed, 32); err != nil || !bytes.Equal(got, raw) {
		t.Errorf("OpenServerKey = %x, %v", got, err)
	}
	if _, err := OpenServerKey(k, "other", sealed, 32); err == nil {
		t.Errorf("OpenServerKey under another name opened")
	}
	if _, err := OpenServerKey(nil, "session", raw, 16); err == nil || err.Error() != `server key "session" is 32 bytes, not 16` {
		t.Errorf("OpenServerKey of the wrong size: %v", err)
	}
	if e := KeyedEvent(5); e.Event != AuditKeyedEvent || e.Actor != "system" || e.Detail != `{"keyed_from":5}` {
		t.Errorf("KeyedEvent = %+v", e)
	}
}
