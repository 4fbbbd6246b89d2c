//go:build !unix

package secretkey

// noFollow is nothing where the system has no O_NOFOLLOW.
const noFollow = 0
