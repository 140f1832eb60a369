package labrun

import (
	"context"
	"time"

	"checkoutlab/payments"
	"checkoutlab/payments/lab"
)

// startReplicaTarget starts a replica scenario's stack as a run's target: the client talks to
// the load balancer, never to a replica.
func (r *Runner) startReplicaTarget(ctx context.Context, p payments.Protections, s lab.Scenario) (*target, error) {
	st, err := r.StartReplicaStack(ctx, ReplicaOptions{Replicas: s.Replicas.N, Off: p.Off, CrashAt: s.CrashAt,
		Proxy: ProxyOptions{RetryPOST: s.Replicas.RetryPOST, Timeout: s.Replicas.ProxyTimeout}})
	if err != nil {
		return nil, err
	}
	client, closeIdle := newHTTPClient()
	return &target{shop: st.Proxy.URL(), gateway: st.Gateway.URL(), apiKeys: st.APIKeys, controlToken: st.ControlToken, db: st.DB, http: client,
		restart: st.Restart, crashAt: s.CrashAt,
		// As a crash scenario's: a killed replica's receipt job waits for the job queue's next
		// leader and the rescuer.
		settleWithin: 45 * time.Second,
		close: func() {
			closeIdle()
			st.Close()
		}}, nil
}
