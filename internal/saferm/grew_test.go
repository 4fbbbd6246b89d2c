package saferm

import "testing"

// TestGrew: an assessment made again after the approval asks again only
// when the deletion grew.
func TestGrew(t *testing.T) {
	approved := &Assessment{Reasons: []string{"recursive deletion (-r/-R)"}, Missing: []string{"/w/gone"}, FileCount: 10, Bytes: 100}
	tests := []struct {
		name string
		now  Assessment
		want bool
	}{
		{"the same", *approved, false},
		{"fewer files", Assessment{Reasons: approved.Reasons, Missing: approved.Missing, FileCount: 9, Bytes: 90}, false},
		{"a reason gone", Assessment{Missing: approved.Missing, FileCount: 10, Bytes: 100}, false},
		{"more files", Assessment{Reasons: approved.Reasons, Missing: approved.Missing, FileCount: 11, Bytes: 100}, true},
		{"more bytes", Assessment{Reasons: approved.Reasons, Missing: approved.Missing, FileCount: 10, Bytes: 101}, true},
		{"now capped", Assessment{Reasons: approved.Reasons, Missing: approved.Missing, FileCount: 10, Bytes: 100, FileCountCapped: true}, true},
		{"a new reason", Assessment{Reasons: []string{"recursive deletion (-r/-R)", "protected path: /etc"}, Missing: approved.Missing, FileCount: 10, Bytes: 100}, true},
		{"a missing target now there", Assessment{Reasons: approved.Reasons, FileCount: 10, Bytes: 100}, true},
	}
	for _, tt := range tests {
		if got := grew(approved, &tt.now); got != tt.want {
			t.Errorf("%s: grew = %v, want %v", tt.name, got, tt.want)
		}
	}
}
