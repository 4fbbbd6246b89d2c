package cli

import (
	"context"
	"fmt"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/gateway/confirm"
	"github.com/countersign/countersign/internal/identity"
)

// StandaloneGateway builds the gateway of countersign mcp without a server
// on its own store, as that command does (tests of the gateway build it
// so too): the gateway's account and agent key, created in a new store,
// the [keys] checked against the store, and the approval service with its
// sweeper, which close stops after the gateway's page. o's Service and
// Agent are set here; the store stays the caller's.
func StandaloneGateway(ctx context.Context, cfg *gateway.Config, store countersign.Store, o confirm.StandaloneOptions) (*gateway.Gateway, func(), error) {
	if store == nil {
		return nil, nil, fmt.Errorf("a standalone gateway needs its store and a directory for its pages")
	}
	agent, err := standaloneAgent(ctx, store)
	if err != nil {
		return nil, nil, err
	}
	if err := cfg.ResolveKeys(ctx, store); err != nil {
		return nil, nil, err
	}
	hub := approval.NewHub()
	svc := approval.New(store, nil, hub, approval.Config{TTL: confirm.ApprovalTTL}, o.Log, nil)
	sweep, stopSweep := context.WithCancel(context.WithoutCancel(ctx))
	go svc.RunSweeper(sweep)
	stop := func() {
		stopSweep()
		hub.Close()
	}
	o.Service, o.Agent = svc, agent
	g, closePage, err := confirm.NewStandalone(cfg, o)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return g, func() {
		closePage()
		stop()
	}, nil
}

// standaloneAgent returns the standalone gateway's own account and agent
// key, creating them in a new store.
func standaloneAgent(ctx context.Context, store countersign.Store) (countersign.Agent, error) {
	const account, name = "local", "mcp-gateway"
	acc, err := store.AccountByName(ctx, account)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		acc, err = (&identity.Admin{Store: store}).CreateAccount(ctx, account)
	}
	if err != nil {
		return countersign.Agent{}, fmt.Errorf("the gateway's account: %w", err)
	}
	keys, err := store.AgentKeys(ctx, acc.ID)
	if err != nil {
		return countersign.Agent{}, err
	}
	for _, k := range keys {
		if k.Name == name && !k.Revoked() {
			return countersign.Agent{KeyID: k.ID, AccountID: acc.ID, KeyName: k.Name}, nil
		}
	}
	k, _, err := (&identity.Admin{Store: store}).CreateAgentKey(ctx, account, name)
	if err != nil {
		return countersign.Agent{}, fmt.Errorf("the gateway's key: %w", err)
	}
	return countersign.Agent{KeyID: k.ID, AccountID: acc.ID, KeyName: k.Name}, nil
}
