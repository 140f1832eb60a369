package bench

import (
	"context"
	"sync/atomic"
	"time"
)

// Summary is one variant of one kind of request over the rounds.
type Summary struct {
	Throughput Spread `json:"throughput_per_s"`
	P50Ms      Spread `json:"p50_ms"`
	P99Ms      Spread `json:"p99_ms"`
	Requests   int    `json:"requests"`
	Unexpected int    `json:"unexpected"`
	FirstError string `json:"first_unexpected,omitempty"`
}

// rounds collects one variant's loads, round after round.
type rounds []load

func (rs rounds) throughputs() []float64 {
	v := make([]float64, len(rs))
	for i, l := range rs {
		v[i] = l.Throughput()
	}
	return v
}

func (rs rounds) summary() Summary {
	var s Summary
	var p50, p99 []float64
	for _, l := range rs {
		p50, p99 = append(p50, l.P50()), append(p99, l.P99())
		s.Requests += l.Requests
		s.Unexpected += l.Unexpected
		if s.FirstError == "" {
			s.FirstError = l.FirstError
		}
	}
	s.Throughput, s.P50Ms, s.P99Ms = spreadOf(rs.throughputs()), spreadOf(p50), spreadOf(p99)
	return s
}

// CreationRow is one endpoint at one number of clients: new keys, protected against
// unprotected, and the ratio of their throughputs round by round.
type CreationRow struct {
	Endpoint    string  `json:"endpoint"`
	Clients     int     `json:"clients"`
	Protected   Summary `json:"protected"`
	Unprotected Summary `json:"unprotected"`
	// Ratio is protected/unprotected throughput, per round.
	Ratio Spread `json:"ratio"`
}

// ReplayRow is one endpoint at one number of clients: a completed key sent again, on the
// protected shop, and its throughput against creation's in the same round.
type ReplayRow struct {
	Endpoint string  `json:"endpoint"`
	Clients  int     `json:"clients"`
	Replay   Summary `json:"replay"`
	// RatioToCreation is replay/creation throughput (protected), per round.
	RatioToCreation Spread `json:"ratio_to_creation"`
}

// cell is one kind of measurement of the rounds.
type cell struct {
	endpoint string
	clients  int
}

// creationRounds runs the rounds of creation and replay: in each round, for each endpoint and
// number of clients, creation on the protected and the unprotected stack (their order
// alternating from round to round), then replays on the protected stack.
func (r *Runner) creationRounds(ctx context.Context, p *plan, prog *progress, prot, unprot *benchStack) ([]CreationRow, []ReplayRow) {
	cells := []cell{}
	for _, path := range []string{checkoutPath, ordersPath} {
		for _, n := range p.clientCounts {
			cells = append(cells, cell{path, n})
		}
	}
	protected := make([]rounds, len(cells))
	unprotected := make([]rounds, len(cells))
	replays := make([]rounds, len(cells))
	for round := range p.rounds {
		for i, c := range cells {
			if ctx.Err() != nil {
				break
			}
			first, second := prot, unprot
			if round%2 == 1 {
				first, second = unprot, prot // neither variant always runs first
			}
			for _, b := range []*benchStack{first, second} {
				prog.say("round %d/%d: %s at %d client(s), %s", round+1, p.rounds, c.endpoint, c.clients, b.name)
				l := createLoad(ctx, b, c, p.cell)
				if b == prot {
					protected[i] = append(protected[i], l)
				} else {
					unprotected[i] = append(unprotected[i], l)
				}
			}
			prog.say("round %d/%d: %s at %d client(s), replays", round+1, p.rounds, c.endpoint, c.clients)
			replays[i] = append(replays[i], replayLoad(ctx, prot, c, p.cell))
		}
	}
	var creation []CreationRow
	var replay []ReplayRow
	for i, c := range cells {
		creation = append(creation, CreationRow{Endpoint: c.endpoint, Clients: c.clients,
			Protected: protected[i].summary(), Unprotected: unprotected[i].summary(),
			Ratio: spreadOf(ratios(protected[i].throughputs(), unprotected[i].throughputs()))})
		replay = append(replay, ReplayRow{Endpoint: c.endpoint, Clients: c.clients, Replay: replays[i].summary(),
			RatioToCreation: spreadOf(ratios(replays[i].throughputs(), protected[i].throughputs()))})
	}
	return creation, replay
}

// createLoad is c.clients clients sending new keys to c.endpoint of b for d. Both variants
// send the Idempotency-Key header: the unprotected shop is asked the same requests.
func createLoad(ctx context.Context, b *benchStack, c cell, d time.Duration) load {
	return runLoad(ctx, c.clients, d, func(ctx context.Context) answer {
		return b.client.post(ctx, c.endpoint, b.client.nextPurchase(c.endpoint), newKey(), nil)
	}, created)
}

// replayLoad first completes one key per client, then has the clients send those keys
// again and again for d: every answer should be the stored one, marked as a replay. The
// clients take the keys in turn, so one key is at times replayed concurrently, as a client's
// retries would be.
func replayLoad(ctx context.Context, b *benchStack, c cell, d time.Duration) load {
	type completed struct {
		key string
		p   purchase
	}
	var keys []completed
	for range c.clients {
		p, key := b.client.nextPurchase(c.endpoint), newKey()
		if a := b.client.post(ctx, c.endpoint, p, key, nil); created(a) {
			keys = append(keys, completed{key, p})
		}
	}
	if len(keys) == 0 {
		return load{Requests: c.clients, Unexpected: c.clients, FirstError: "no key could be completed to replay"}
	}
	var next atomic.Int64
	return runLoad(ctx, c.clients, d, func(ctx context.Context) answer {
		k := keys[int(next.Add(1))%len(keys)]
		return b.client.post(ctx, c.endpoint, k.p, k.key, nil)
	}, replayed)
}
