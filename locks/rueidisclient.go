package locks

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// rueidisClient stands where the operating system stands for a client program: between rueidislock
// and its connection. It is the rueidis.Client the locker gets through LockerOption.ClientBuilder,
// the library's hook for that. It changes nothing the library decides:
//
//   - The client's wall clock. rueidislock reads time.Now itself, and Go reads the clock without
//     libc, so the clock shim cannot move it. Go's timers run on the monotonic clock, so a step of the
//     wall clock changes, for this library, only the absolute times it sends: the PXAT of its SET and
//     the PEXPIREAT of its extensions. The client moves exactly those (script arguments that are Unix
//     milliseconds within a day of now) by the offset of Options.Clock, as the step would have.
//   - Pause and crash: a paused client sends nothing until it resumes, as under SIGSTOP; a crashed
//     one sends nothing at all.
//   - What it learns: the value of each SET it sent (the library keeps it to itself), and each
//     extension the server confirmed, which becomes a renewed event.
type rueidisClient struct {
	rueidis.Client
	opts    Options
	renewed func(key, value string)

	gate *grpcGate // etcd's pause gate serves here as well

	mu   sync.Mutex
	dead bool
	sent map[string]rueidisSent // library key -> the lease it last set there
}

// rueidisSent is a lease the client set: its value and the last expiry time the server confirmed.
type rueidisSent struct {
	value string
	at    int64
}

var errClientCrashed = errors.New("client crashed: nothing leaves it")

func newRueidisClient(o Options, renewed func(key, value string)) *rueidisClient {
	return &rueidisClient{opts: o, renewed: renewed, gate: newGRPCGate(), sent: map[string]rueidisSent{}}
}

// build is the locker's ClientBuilder.
func (c *rueidisClient) build(o rueidis.ClientOption) (rueidis.Client, error) {
	inner, err := rueidis.NewClient(o)
	if err != nil {
		return nil, err
	}
	c.Client = inner
	return c, nil
}

// timedScript recognises rueidislock's scripts that carry an absolute time: EVALSHA|EVAL script 1
// key value unix-ms. It returns the key, value and time, and ok.
func timedScript(cs []string) (key, value string, at int64, ok bool) {
	if len(cs) != 6 || cs[0] != "EVALSHA" && cs[0] != "EVAL" || cs[2] != "1" {
		return "", "", 0, false
	}
	at, err := strconv.ParseInt(cs[5], 10, 64)
	if err != nil {
		return "", "", 0, false
	}
	if d := at - time.Now().UnixMilli(); d < -day || d > day {
		return "", "", 0, false // a duration (FallbackSETPX), not a time
	}
	return cs[3], cs[4], at, true
}

const day = int64(24 * time.Hour / time.Millisecond)

// Do implements rueidis.Client.
func (c *rueidisClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.gate.wait() // a stopped process notices no deadline until it runs again
	c.mu.Lock()
	dead := c.dead
	c.mu.Unlock()
	if dead {
		return rueidis.NewErrorResult(errClientCrashed)
	}
	key, value, at, timed := timedScript(cmd.Commands())
	if timed {
		if off := c.opts.now().Sub(time.Now()).Round(time.Millisecond); off != 0 {
			at += off.Milliseconds()
			cmd = c.shifted(cmd, at)
		}
	}
	resp := c.Client.Do(ctx, cmd)
	if timed {
		c.observe(key, value, at, resp)
	}
	return resp
}

// shifted is cmd with its time argument replaced by at.
func (c *rueidisClient) shifted(cmd rueidis.Completed, at int64) rueidis.Completed {
	cs := append([]string(nil), cmd.Commands()...)
	cs[5] = strconv.FormatInt(at, 10)
	out := c.Client.B().Arbitrary(cs[0]).Args(cs[1:]...).Build()
	if cmd.IsRetryable() {
		out = out.ToRetryable()
	}
	return out
}

// observe notes a SET's value ("OK") and reports an extension to a later time (1).
func (c *rueidisClient) observe(key, value string, at int64, resp rueidis.RedisResult) {
	if s, err := resp.ToString(); err == nil && s == "OK" {
		c.mu.Lock()
		c.sent[key] = rueidisSent{value: value, at: at}
		c.mu.Unlock()
		return
	}
	if n, err := resp.AsInt64(); err != nil || n != 1 {
		return
	}
	c.mu.Lock()
	s, ok := c.sent[key]
	later := ok && s.value == value && at > s.at
	if later {
		c.sent[key] = rueidisSent{value: value, at: at}
	}
	c.mu.Unlock()
	if later {
		c.renewed(key, value)
	}
}

// value is the value the client last set at key.
func (c *rueidisClient) value(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent[key].value
}

// kill makes every later request fail, and lets a paused one go to fail.
func (c *rueidisClient) kill() {
	c.mu.Lock()
	c.dead = true
	c.mu.Unlock()
	c.gate.resume()
}
