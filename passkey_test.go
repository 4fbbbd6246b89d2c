package countersign

import "testing"

func TestPasskeyRules(t *testing.T) {
	wantErr(t, "replayed", RefusePasskeyUse(true), ECONFLICT,
		"the passkey's signature counter did not advance: the assertion was replayed or the passkey was copied")
	wantErr(t, "no passkey", RefusePasskeyUse(false), ENOTFOUND, "passkey not found")
}
