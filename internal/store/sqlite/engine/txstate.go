package engine

import "context"

// TxState is what the changes of one write transaction keep beside the rows
// they write, for the writer to write once, before the commit: the store's
// audit chain, whose head every change moves, is written once per group
// instead of once per change. The writer makes one for each run of a group
// (Config.NewTxState) and hands it to each change through its context
// (TxStateOf); a change run outside the writer has none.
type TxState interface {
	// Flush writes what the changes kept since the last Flush, in tx.
	Flush(ctx context.Context, tx Querier) error
	// Mark notes the state as it is, before a change runs.
	Mark()
	// Undo goes back to the state at the last Mark: the change run
	// since is undone.
	Undo()
	// Forget drops what the state knows of the database, after a change
	// that may have written it by its own statements: the next change
	// reads it again.
	Forget()
}

// stateKey is the context key of the transaction's TxState.
type stateKey struct{}

// TxStateOf returns the state of the write transaction a change given ctx
// runs in, or nil outside the writer.
func TxStateOf(ctx context.Context) TxState {
	s, _ := ctx.Value(stateKey{}).(TxState)
	return s
}

// noState is the TxState of an engine opened without one.
type noState struct{}

func (noState) Flush(context.Context, Querier) error { return nil }
func (noState) Mark()                                {}
func (noState) Undo()                                {}
func (noState) Forget()                              {}
