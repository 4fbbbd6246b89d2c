package engine

// A change may keep in memory what it wrote (a request as it left it), to
// answer a read that follows at once without the database, on one
// condition: that nothing else was committed to the file since, by another
// process. What this process commits it knows, and keeps right in memory
// itself; another process's commit only the file tells. The second counter
// of the counter file counts every commit, by any process; this process
// counts its own beside it. While the two have moved alike since a change,
// every commit since was this process's.
//
// A process moves the shared count after its commit and before any caller
// hears of it, as it does the change counter: once another process's
// change has returned, no process serves what it changed from memory. A
// process that dies between its commit and the move is not seen: what is
// kept that way must age out as the caches do (CacheTTL).

// Stamp is the place of a change among the commits on the file, taken by
// the change in its transaction (DB.Stamp).
type Stamp struct {
	all, own uint64
	ok       bool
}

// Stamp returns the place of the change running now. It must be called
// from within a change's function (UpdateCached, UpdateUncached): the
// change holds the file's write lock, so no process commits meanwhile. The
// zero Stamp, returned where processes cannot share the count, is never
// alone.
func (db *DB) Stamp() Stamp {
	if db.changes == nil {
		return Stamp{}
	}
	// Only the writer moves own, so the two are read here between its
	// moves: no commit of this process is half counted.
	return Stamp{all: db.changes.loadCommits(), own: db.ownCommits.Load(), ok: true}
}

// Alone reports whether every commit on the file since s was this
// process's. A commit of this process being counted now, or of another
// whose move is late (it committed before s was taken), makes it report
// false: never true wrongly, at worst false for a moment.
func (db *DB) Alone(s Stamp) bool {
	if !s.ok {
		return false
	}
	// own is read before all, and countCommit moves all before own: all
	// has moved at least as much as own has by the time it is read, so
	// the two agree only when no other process moved all.
	own := db.ownCommits.Load()
	all := db.changes.loadCommits()
	return all-s.all == own-s.own
}

// countCommit counts a commit of this process, that may have been made: on
// the file first, then here (see Alone). Called by the writer before any
// caller of the group hears of the commit.
func (db *DB) countCommit() {
	if db.changes == nil {
		return
	}
	db.changes.bumpCommits()
	db.ownCommits.Add(1)
}
