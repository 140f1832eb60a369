package labrun

// Several shop replicas on one database behind a load balancer (proxy.go), each a child
// process on a listener the lab keeps (child.go), so that any of them can be killed at any
// moment and started again on the same address. The chaos lab (package chaos) and the
// replica scenarios run on such a stack.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"time"

	"checkoutlab/payments"
)

// ReplicaStack is a CrashStack with Replicas shop processes behind a Proxy. The gateway
// delivers its webhooks to the first replica's address.
type ReplicaStack struct {
	*CrashStack
	Replicas []*Child
	Proxy    *Proxy
}

// ReplicaOptions says how to start a ReplicaStack.
type ReplicaOptions struct {
	Replicas int             // at least 1
	Off      payments.Switch // the one protection every replica runs without, "" for none
	Proxy    ProxyOptions
	// CrashAt is the first replica's crash point, "" for none.
	CrashAt string
	// Extra is added to the replicas' environment.
	Extra map[string]string
}

// StartReplicaStack starts the gateway in this process, o.Replicas shop processes on the
// lab's database and a proxy in front of them.
func (r *Runner) StartReplicaStack(ctx context.Context, o ReplicaOptions) (*ReplicaStack, error) {
	if o.Replicas < 1 {
		return nil, fmt.Errorf("replicas: got %d, want at least 1", o.Replicas)
	}
	cs, err := r.StartCrashStack(ctx, o.Off, o.CrashAt, o.Extra)
	if err != nil {
		return nil, err
	}
	s := &ReplicaStack{CrashStack: cs, Replicas: []*Child{cs.Shop}}
	for len(s.Replicas) < o.Replicas {
		c, err := cs.StartShop(ctx)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.Replicas = append(s.Replicas, c)
	}
	var urls []string
	for _, c := range s.Replicas {
		urls = append(urls, c.URL())
	}
	if s.Proxy, err = StartProxy(urls, o.Proxy); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops the proxy, then the CrashStack.
func (s *ReplicaStack) Close() {
	if s.Proxy != nil {
		s.Proxy.Close()
	}
	s.CrashStack.Close()
}

// Kill ends the shop process at once with SIGKILL, as a lost machine or the OOM killer
// would, and waits until it has ended. The listener stays open: connections wait in its
// queue for the next process. It returns when the process died.
func (c *Child) Kill() (time.Time, error) {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	if cmd == nil {
		return time.Time{}, errors.New("the shop was never started")
	}
	_ = cmd.Process.Signal(syscall.SIGKILL) // fails only if it has already ended
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		return time.Time{}, errors.New("the shop did not end within 15s of SIGKILL")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended, nil
}

// StartAgain starts a new shop process on the same listener, with crashAt as its crash
// point ("" for none), once the last one has ended, and waits until it answers /healthz.
func (c *Child) StartAgain(ctx context.Context, crashAt string) error {
	select {
	case <-c.Done():
	default:
		return errors.New("the shop is still running")
	}
	return c.start(ctx, crashAt)
}

// Done is closed when the current shop process has ended.
func (c *Child) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// GetJSON GETs url, with apiKey as its Bearer token if set, and decodes a 200 answer into v.
func GetJSON(ctx context.Context, client *http.Client, url, apiKey string, v any) error {
	return getJSON(ctx, client, url, apiKey, v)
}
