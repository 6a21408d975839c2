package locks

import "github.com/bsm/redislock"

// bsmSharedToken is the token every client of the bsm-redislock-token lock passes as Options.Token,
// as services do that name the lock's owner by their service name, with the instance in
// Options.Metadata.
const bsmSharedToken = "lockpick-service"

// The bsm-redislock-token lock is bsm/redislock with a custom Options.Token shared by every client. The
// library's obtain script falls back, when SET NX fails, to a plain SET PX over a key whose value
// begins with the same token (meant to let an owner obtain again what it holds), so a second client
// with the token takes over a lease another one holds, and both hold it. docs/bugs.md has the row.
func newBsmRedislockToken(node Endpoint, o Options) (Locker, error) {
	b := newBsmRedislock(node, o)
	// Each lease carries its own metadata, so the lease values of two holders still differ.
	b.obtain = func() *redislock.Options { return &redislock.Options{Token: bsmSharedToken, Metadata: newValue()} }
	return b, nil
}
