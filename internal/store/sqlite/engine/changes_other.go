//go:build !unix

package engine

import "errors"

// changeCounter is not built where memory cannot be shared through a mapped
// file: nothing is cached there.
type changeCounter struct{}

func openChangeCounter(string) (*changeCounter, error) {
	return nil, errors.New("no change counter on this system")
}

func (c *changeCounter) load() uint64        { return 0 }
func (c *changeCounter) bump()               {}
func (c *changeCounter) loadCommits() uint64 { return 0 }
func (c *changeCounter) bumpCommits()        {}

// runtimeSharesMemory: no process on this system caches.
const runtimeSharesMemory = false
