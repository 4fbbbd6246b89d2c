package main

import (
	"context"
	"time"

	"github.com/countersign/countersign/client"
)

// callTimeout bounds every API call but the long poll (which the client
// bounds by its wait plus 15 s), so that a stuck server fails the run
// instead of hanging it.
const callTimeout = 30 * time.Second

func create(ctx context.Context, c *client.Client, in client.CreateInput) (*client.Request, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return c.Create(ctx, in)
}

func consume(ctx context.Context, c *client.Client, id string) (*client.Request, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return c.Consume(ctx, id)
}

func approve(ctx context.Context, c *client.Client, id string) (*client.Request, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return c.Decide(ctx, id, client.Decision{Decision: "approve"})
}
