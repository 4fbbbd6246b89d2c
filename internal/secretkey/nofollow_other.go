//go:build !unix

package secretkey

import "os"

// noFollow is nothing where the system has no O_NOFOLLOW.
const noFollow = 0

// ownLikeDir does nothing where files have no Unix owner.
func ownLikeDir(*os.File, string) error { return nil }
