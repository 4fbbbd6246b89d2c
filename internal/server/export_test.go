package server

import "net/http"

// DropAfterCommit makes the server drop the connection of every change
// drop picks, once it is committed and before it is answered, until the
// returned function is called. Tests that use it stay serial: the hook is
// one for the package.
func DropAfterCommit(drop func(r *http.Request) bool) (restore func()) {
	dropAfterCommit = drop
	return func() { dropAfterCommit = nil }
}
