package fakegateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"gorm.io/gorm"
)

// DemoWebhookSecret is the documented demo signing secret shared by the shop and the gateway
// when WEBHOOK_SECRET is unset. It is public: never use it outside a demo.
const DemoWebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// Defaults of the webhook sender. The retry schedule is a compressed version of a real
// provider's (which retries for days): 1 s, 2 s, 4 s … capped at RetryMax.
const (
	DefaultRetryBase       = time.Second
	DefaultRetryMax        = 30 * time.Second
	DefaultMaxAttempts     = 8
	DefaultPollInterval    = 500 * time.Millisecond
	DefaultDeliveryTimeout = 10 * time.Second
	// DefaultSenders is how many webhooks are sent at once. A delivery mostly waits for the
	// receiver (the shop's handler runs a transaction per webhook), so a handful of senders
	// keeps up with a busy shop on two cores; more only queue for the database.
	DefaultSenders = 8
	// DefaultFaultDelay is the delay_ms of timeout_before_commit and commit_then_delay when
	// none is given: longer than any sensible client timeout.
	DefaultFaultDelay = 30 * time.Second
)

// Defaults of Serve's server. There is no write timeout: the delay and timeout faults hold
// answers back on purpose. IdleTimeout is longer than the 90 s after which Go's default
// client transport drops an idle connection, so the client lets go first and never sends a
// request on a connection the gateway is closing at that moment.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
)

// Config is everything New needs. DB is required and must already be migrated (OpenDB does
// both); the zero value of every other field picks a documented default.
type Config struct {
	DB *gorm.DB
	// WebhookURL receives every event, e.g. "http://127.0.0.1:8080/webhooks/gateway". Empty
	// means events are recorded but not sent.
	WebhookURL string
	// WebhookSecret signs events the Standard Webhooks way ("whsec_" + base64). Default:
	// DemoWebhookSecret.
	WebhookSecret string
	Logger        *slog.Logger
	// RetryBase is the wait after the first failed attempt; it doubles per attempt up to
	// RetryMax. MaxAttempts is how many attempts a delivery gets before it is marked failed.
	RetryBase   time.Duration
	RetryMax    time.Duration
	MaxAttempts int
	// PollInterval is how often the gateway looks for due deliveries that no commit of its own
	// announced (retries, delays, another process's deliveries).
	PollInterval time.Duration
	// DeliveryTimeout bounds one POST to WebhookURL.
	DeliveryTimeout time.Duration
	// Senders is how many deliveries are sent at once (see runSenders: the deliveries of one
	// charge still go one after the other, in order). Default: DefaultSenders.
	Senders int
	// Now is the clock; tests may replace it. Default: time.Now.
	Now func() time.Time
	// ControlToken, when set, guards the operator's side of the gateway: the control API
	// (/_control/*) needs "Authorization: Bearer <ControlToken>", and the page (/) a browser
	// logged in once with /?token=<ControlToken>. At least 16 letters, digits or - . _ ~.
	// Empty leaves both open, as a gateway on a developer's machine may be; the page's forms
	// need their CSRF token either way. cmd/fakegateway defaults it to DemoControlToken.
	ControlToken string
	// ReadHeaderTimeout, ReadTimeout and IdleTimeout bound how long Serve's server waits for
	// a request's headers, for the whole request, and for the next request on an idle
	// connection, so a client that stalls cannot hold a connection for ever. Defaults:
	// DefaultReadHeaderTimeout, DefaultReadTimeout, DefaultIdleTimeout.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
}

// Gateway is the fake provider: its HTTP API, its ledger and its webhook sender.
type Gateway struct {
	db         *gorm.DB
	cfg        Config
	log        *slog.Logger
	signer     *standardwebhooks.Webhook
	httpClient *http.Client
	faults     *faultDice
	sessionKey []byte // signs the page's session cookie and CSRF tokens

	wake       []chan struct{} // one per sender: nudges it after a commit that wrote deliveries
	claimToken string          // marks the deliveries this process's senders have claimed
	closing    chan struct{}   // closed by Close: ends hanging fault handlers and the sender
	closeOnce  sync.Once
	running    sync.WaitGroup
}

// New checks cfg and returns a Gateway. It returns an error if DB is nil, the webhook secret
// is not "whsec_" + base64, WebhookURL is not an absolute http(s) URL, or ControlToken is set
// but too short or holds other characters. New does not start the sender: call Start.
func New(cfg Config) (*Gateway, error) {
	if cfg.DB == nil {
		return nil, errors.New("fakegateway: Config.DB is required")
	}
	if cfg.WebhookSecret == "" {
		cfg.WebhookSecret = DemoWebhookSecret
	}
	signer, err := standardwebhooks.NewWebhook(cfg.WebhookSecret)
	if err != nil {
		return nil, fmt.Errorf("fakegateway: webhook secret must be whsec_ followed by base64: %w", err)
	}
	if cfg.WebhookURL != "" {
		u, err := url.Parse(cfg.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("fakegateway: webhook URL %q is not an absolute http(s) URL", cfg.WebhookURL)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ControlToken != "" {
		if err := checkControlToken(cfg.ControlToken); err != nil {
			return nil, err
		}
	}
	for _, d := range []struct {
		field *time.Duration
		def   time.Duration
	}{
		{&cfg.RetryBase, DefaultRetryBase}, {&cfg.RetryMax, DefaultRetryMax},
		{&cfg.PollInterval, DefaultPollInterval}, {&cfg.DeliveryTimeout, DefaultDeliveryTimeout},
		{&cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout}, {&cfg.ReadTimeout, DefaultReadTimeout},
		{&cfg.IdleTimeout, DefaultIdleTimeout},
	} {
		if *d.field <= 0 {
			*d.field = d.def
		}
	}
	if cfg.RetryMax < cfg.RetryBase {
		cfg.RetryMax = cfg.RetryBase
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Senders <= 0 {
		cfg.Senders = DefaultSenders
	}
	cfg.Senders = min(cfg.Senders, laneCount) // a sender without a lane would idle
	wake := make([]chan struct{}, cfg.Senders)
	for i := range wake {
		wake[i] = make(chan struct{}, 1)
	}
	return &Gateway{
		db:     cfg.DB,
		cfg:    cfg,
		log:    cfg.Logger.With("component", "fakegateway"),
		signer: signer,
		// A plain client with a timeout, as real providers use, on a transport of its own
		// that keeps a connection per sender alive between deliveries.
		httpClient: &http.Client{Timeout: cfg.DeliveryTimeout, Transport: newWebhookTransport(cfg.Senders)},
		faults:     newFaultDice(),
		sessionKey: newSessionKey(cfg.ControlToken),
		wake:       wake,
		claimToken: newID("snd"),
		closing:    make(chan struct{}),
	}, nil
}

// newWebhookTransport is the senders' HTTP transport: http.DefaultTransport's settings and
// timeouts, keep-alive on, but as many idle connections kept per host as there are senders
// (the default keeps 2), so that busy senders reuse their connections to the shop instead of
// opening one per webhook. Every webhook sent goes through here: wrap the transport (tracing,
// metrics) in this one place.
func newWebhookTransport(senders int) http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = senders
	t.MaxIdleConns = max(t.MaxIdleConns, senders)
	return t
}

// Start runs the webhook senders until ctx ends or Close is called. It resumes every delivery
// still pending in the database, including those left by a previous process (once their
// claim has run out, if that process died while sending them). Start blocks; run it in its
// own goroutine.
func (g *Gateway) Start(ctx context.Context) {
	g.running.Add(1)
	defer g.running.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-g.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	g.runSenders(ctx)
}

// Close stops the senders and releases handlers that are hanging on purpose (the timeout and
// delay faults), then waits for the senders to return. It does not close the database, which
// belongs to the caller. Close is safe to call more than once.
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() { close(g.closing) })
	g.running.Wait()
	return nil
}

// now is the gateway's clock in UTC with microsecond precision, the precision both databases
// keep, so a time read back compares equal to the one written.
func (g *Gateway) now() time.Time { return g.cfg.Now().UTC().Truncate(time.Microsecond) }

// nudge wakes the sender of chargeID's deliveries without blocking; one pending nudge is as
// good as many.
func (g *Gateway) nudge(chargeID string) { g.wakeSender(laneOf(chargeID) % len(g.wake)) }

// wakeSender wakes sender n without blocking.
func (g *Gateway) wakeSender(n int) {
	select {
	case g.wake[n] <- struct{}{}:
	default:
	}
}
