//go:build !unix

package gateway

import "log/slog"

func copiesPrefix() string { return "countersign-upload-" }

// sweepCopies does nothing where processes cannot be asked about.
func sweepCopies(string, *slog.Logger) {}
