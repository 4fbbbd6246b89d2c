package notify

import (
	"errors"
	"strings"
	"testing"
)

// TestScrubbed: token-like runs are cut out of an error's text; the rest,
// and the error underneath, stay.
func TestScrubbed(t *testing.T) {
	for _, secret := range []string{
		strings.Repeat("0a", 32),           // a link's token
		"tk_ab12cd34ef56gh78ij90kl12mn3",   // an ntfy token
		"AHVzZXIAcDRzcy93b3JkK3NlY3JldA==", // AUTH PLAIN, base64
	} {
		under := errors.New("smtp: 535 rejected " + secret + " (try again)")
		err := scrubbed{under}
		if got := err.Error(); strings.Contains(got, secret) || strings.Contains(got, secret[:20]) ||
			!strings.Contains(got, "535 rejected") || !strings.Contains(got, "(try again)") {
			t.Errorf("scrubbed %q to %q", under, got)
		}
		if !errors.Is(err, under) {
			t.Errorf("the scrubbed error hides the error underneath")
		}
	}
}
