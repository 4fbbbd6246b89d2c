package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// Spec is a channel as an administrator gives it: on the command line or in
// the configuration file.
type Spec struct {
	Account  string // account name
	Name     string
	Type     countersign.ChannelType
	Settings Settings
	// Secret is the webhook's signing secret, the SMTP password or the ntfy
	// access token; it is stored sealed.
	Secret string
}

// Admin manages the channels of accounts. The CLI and the server's start
// (for the configuration file) both go through it.
type Admin struct {
	Store countersign.Store
	Clock countersign.Clock
	keys  *keyring
}

func (a *Admin) keyring() *keyring {
	if a.keys == nil {
		a.keys = &keyring{store: a.Store}
	}
	return a.keys
}

func (a *Admin) now() countersign.Clock {
	if a.Clock == nil {
		return countersign.SystemClock{}
	}
	return a.Clock
}

// build checks a spec and returns the channel it describes, with the id
// given (a new one when empty) and the secret sealed to it.
func (a *Admin) build(ctx context.Context, spec Spec, id string) (*countersign.Channel, error) {
	if err := identity.ValidName("the channel name", spec.Name); err != nil {
		return nil, err
	}
	set, err := spec.Settings.normalize(spec.Type, spec.Secret)
	if err != nil {
		return nil, err
	}
	for _, u := range spec.Settings.Approvers {
		if err := identity.ValidName("an approver the channel names", u); err != nil {
			return nil, err
		}
		if !slices.Contains(set.Approvers, u) {
			set.Approvers = append(set.Approvers, u)
		}
	}
	acc, err := a.Store.AccountByName(ctx, spec.Account)
	if err != nil {
		return nil, err
	}
	config, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	if id == "" {
		id = countersign.NewID("chn_")
	}
	c := &countersign.Channel{ID: id, AccountID: acc.ID, Name: spec.Name, Type: spec.Type, Config: config, CreatedAt: a.now().Now()}
	if c.Secret, err = a.keyring().sealSecret(ctx, c.ID, spec.Secret); err != nil {
		return nil, err
	}
	return c, nil
}

// Add creates a channel. Errors: EINVALID, ENOTFOUND (account), ECONFLICT
// (name taken).
func (a *Admin) Add(ctx context.Context, spec Spec) (*countersign.Channel, error) {
	c, err := a.build(ctx, spec, "")
	if err != nil {
		return nil, err
	}
	if err := a.Store.CreateChannel(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Put creates the channel, or updates the account's channel of that name,
// keeping its queue. It reports whether it created one.
func (a *Admin) Put(ctx context.Context, spec Spec) (bool, error) {
	existing, err := a.find(ctx, spec.Account, spec.Name)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		_, err := a.Add(ctx, spec)
		return err == nil, err
	} else if err != nil {
		return false, err
	}
	c, err := a.build(ctx, spec, existing.ID)
	if err != nil {
		return false, err
	}
	return false, a.Store.UpdateChannel(ctx, c)
}

// Apply puts every spec of a configuration file, in order, and stops at the
// first error. Channels the file does not name stay as they are.
func (a *Admin) Apply(ctx context.Context, specs []Spec) (created, updated int, err error) {
	for _, s := range specs {
		fresh, err := a.Put(ctx, s)
		if err != nil {
			return created, updated, fmt.Errorf("channel %s of account %s: %w", s.Name, s.Account, err)
		}
		if fresh {
			created++
		} else {
			updated++
		}
	}
	return created, updated, nil
}

// find returns the account's channel of that name. Errors: ENOTFOUND.
func (a *Admin) find(ctx context.Context, account, name string) (*countersign.Channel, error) {
	acc, err := a.Store.AccountByName(ctx, account)
	if err != nil {
		return nil, err
	}
	list, err := a.Store.Channels(ctx, acc.ID)
	if err != nil {
		return nil, err
	}
	for _, c := range list {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, countersign.Errorf(countersign.ENOTFOUND, "account %s has no channel named %q", account, name)
}

// List returns an account's channels.
func (a *Admin) List(ctx context.Context, account string) ([]*countersign.Channel, error) {
	acc, err := a.Store.AccountByName(ctx, account)
	if err != nil {
		return nil, err
	}
	return a.Store.Channels(ctx, acc.ID)
}

// Remove removes an account's channel with its queue. Errors: ENOTFOUND.
func (a *Admin) Remove(ctx context.Context, account, name string) error {
	acc, err := a.Store.AccountByName(ctx, account)
	if err != nil {
		return err
	}
	return a.Store.RemoveChannel(ctx, acc.ID, name)
}

// Status returns the delivery status of an account's channels.
func (a *Admin) Status(ctx context.Context, account string) ([]*countersign.ChannelStatus, error) {
	acc, err := a.Store.AccountByName(ctx, account)
	if err != nil {
		return nil, err
	}
	return a.Store.OutboxStatus(ctx, acc.ID)
}

// Test sends a test message through an account's channel at once, outside
// the outbox, and returns the sender's error.
func (a *Admin) Test(ctx context.Context, account, name string, d *Delivery) error {
	c, err := a.find(ctx, account, name)
	if err != nil {
		return err
	}
	secret, err := a.keyring().openSecret(ctx, c)
	if err != nil {
		return err
	}
	m := d.testMessage(account, c.Name, a.now().Now())
	return d.Send(ctx, c, secret, m)
}
