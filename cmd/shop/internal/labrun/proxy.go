package labrun

// A load balancer in front of several shop replicas, as a deployment has one: nginx, Caddy,
// an Envoy or a cloud load balancer. It is net/http/httputil's ReverseProxy with a transport
// that picks the replicas round robin, and that may do what many proxies do when a replica
// fails mid-request: send the same request again to the next replica (nginx's
// `proxy_next_upstream error timeout non_idempotent`). For a GET that is harmless; for a POST
// it is a second, concurrent attempt of a checkout the first replica may already have charged
// — exactly what the shop's idempotency keys must absorb.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"
)

// ProxyOptions configures a Proxy.
type ProxyOptions struct {
	// RetryPOST sends a POST whose replica failed (the connection broke, or no answer came
	// within Timeout) again to the next replica. Without it only GETs and HEADs are retried,
	// as nginx does by default.
	RetryPOST bool
	// Timeout bounds the wait for a replica's response headers; 0 waits as long as the
	// client does.
	Timeout time.Duration
}

// Proxy is a round-robin reverse proxy on 127.0.0.1.
type Proxy struct {
	url      string
	srv      *http.Server
	backends []*url.URL
	opts     ProxyOptions
	next     atomic.Uint64
	retried  atomic.Int64
	base     *http.Transport
}

// StartProxy listens on a free port of 127.0.0.1 and forwards every request to one of
// backends (base URLs), round robin.
func StartProxy(backends []string, opts ProxyOptions) (*Proxy, error) {
	if len(backends) == 0 {
		return nil, errors.New("proxy: no replica to forward to")
	}
	p := &Proxy{opts: opts}
	for _, b := range backends {
		u, err := url.Parse(b)
		if err != nil {
			return nil, fmt.Errorf("proxy: replica %q: %w", b, err)
		}
		p.backends = append(p.backends, u)
	}
	p.base = http.DefaultTransport.(*http.Transport).Clone()
	p.base.MaxIdleConnsPerHost = 64
	p.base.ResponseHeaderTimeout = opts.Timeout
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.url = "http://" + ln.Addr().String()
	rp := &httputil.ReverseProxy{
		// The replica is chosen per attempt by the transport; Rewrite only keeps the client's
		// address in X-Forwarded-For, as a real proxy would.
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetXForwarded()
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "replica"
		},
		Transport: p,
		ErrorLog:  nil,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, `{"error":"bad_gateway","message":"the load balancer got no answer from a replica"}`)
		},
	}
	p.srv = &http.Server{Handler: rp, ReadHeaderTimeout: 5 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// URL is the proxy's base URL.
func (p *Proxy) URL() string { return p.url }

// Retried is how many requests the proxy has sent again to another replica.
func (p *Proxy) Retried() int64 { return p.retried.Load() }

// Close stops the proxy.
func (p *Proxy) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
	p.base.CloseIdleConnections()
}

// RoundTrip sends req to the next replica and, if that fails and the request may be sent
// again, to the one after it, at most once per replica.
func (p *Proxy) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
	}
	retryable := req.Method == http.MethodGet || req.Method == http.MethodHead || p.opts.RetryPOST
	var lastErr error
	for i := range p.backends {
		b := p.backends[int(p.next.Add(1)-1)%len(p.backends)]
		out := req.Clone(req.Context())
		out.URL.Scheme, out.URL.Host, out.Host = b.Scheme, b.Host, b.Host
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
		// The proxy alone decides whether a request is sent again: net/http's transport would
		// otherwise resend a request carrying an Idempotency-Key by itself, to the same replica.
		out.GetBody = nil
		if len(body) == 0 {
			out.Body = http.NoBody
		}
		res, err := p.base.RoundTrip(out)
		if err == nil {
			return res, nil
		}
		lastErr = err
		if !retryable || req.Context().Err() != nil {
			break
		}
		if i+1 < len(p.backends) {
			p.retried.Add(1)
		}
	}
	return nil, lastErr
}
