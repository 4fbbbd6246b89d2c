package cli

import (
	"context"
	"fmt"
)

// schemaVersioner is a store that tells its schema version; both backends
// are.
type schemaVersioner interface {
	SchemaVersion(ctx context.Context) (int, error)
}

// runMigrate is "countersign migrate": it opens the store, which applies
// the migrations this binary knows (under an advisory lock on PostgreSQL,
// so that it may run beside starting replicas), and reports the schema
// version. A database newer than the binary is refused.
func runMigrate(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "migrate")
	where := storeFlags(env, fs)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("%w: countersign migrate [--data DIR | --database-url URL] takes no arguments", ErrUsage)
	}
	store, err := where.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	sv, ok := store.(schemaVersioner)
	if !ok {
		return fmt.Errorf("the store does not report its schema version")
	}
	v, err := sv.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s: schema version %d\n", where.describe(), v)
	return nil
}
