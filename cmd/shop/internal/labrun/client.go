package labrun

// The failure lab's client: what a customer's browser or an API integration sends. It is a
// careful client — it retries with the same key — unless the client_same_key switch is off.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"checkoutlab/models"
	"checkoutlab/payments"
	"checkoutlab/payments/lab"
)

// client is the lab's API client: a careful one that retries with the same key, unless
// sameKey is false (the client_same_key switch).
type client struct {
	shop    string
	apiKeys map[string]string
	http    *http.Client
	runID   string // prefixes every key, so runs on one database never share keys
	sameKey bool

	mu      sync.Mutex
	answers map[string]map[string]bool // tenant/key → order ids the answers named
	sent    map[string]bool            // tenant/key of every request sent
	tab     *tab                       // the storefront tab of Browser steps, once opened
	// events are the client's own attempts and the answers it got, and what the lab did to
	// the stack (a crash, a reaper run): the lanes of the timeline that the shop cannot
	// journal, because only the client knows what it sent and saw.
	events []lab.Row
}

// newClient is a client for t whose keys and customer come from seed.
func newClient(t *target, sameKey bool, seed int64) *client {
	return &client{shop: t.shop, apiKeys: t.apiKeys, http: t.http, sameKey: sameKey,
		runID: "run_" + strconv.FormatInt(seed, 36), answers: map[string]map[string]bool{}, sent: map[string]bool{}}
}

// record notes a client event under tenant/key.
func (c *client) record(tenant, key, detail string) {
	c.recordAs(models.ActorClient, "attempt", tenant, key, detail)
}

// recordAs notes an event the lab itself brought about (a crash, a reaper run) under
// tenant/key, so that the timeline shows it where it happened.
func (c *client) recordAs(actor, kind, tenant, key, detail string) {
	c.recordAt(time.Now().UTC(), actor, kind, tenant, key, detail)
}

// recordAt notes an event that happened at a known time.
func (c *client) recordAt(at time.Time, actor, kind, tenant, key, detail string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, lab.Row{At: at, Actor: actor, Kind: kind, Key: key, Detail: detail})
}

// rows returns a copy of the client's events.
func (c *client) rows() []lab.Row {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]lab.Row(nil), c.events...)
}

// answerSets returns, per tenant/key, the order ids the answers under it named.
func (c *client) answerSets() map[string]map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.answers)
}

// usedKeys lists the tenant/key pairs the client has sent so far.
func (c *client) usedKeys() [][2]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys [][2]string
	for k := range c.sent {
		tenant, key, _ := strings.Cut(k, "/")
		keys = append(keys, [2]string{tenant, key})
	}
	return keys
}

// answerDetail words what the client got back.
func answerDetail(a Answer) string {
	if a.Err != nil {
		return "no answer: the connection was lost or timed out"
	}
	if code, _ := a.Body["error"].(string); code != "" {
		return fmt.Sprintf("answer %d %s", a.Status, code)
	}
	return fmt.Sprintf("answer %d", a.Status)
}

func (c *client) play(ctx context.Context, t *target, step lab.Step) error {
	switch {
	case step.Fault != nil:
		if err := ArmFault(ctx, c.http, t.gateway, t.controlToken, step.Fault); err != nil {
			return err
		}
	case step.Checkout != nil:
		copies := max(step.Checkout.Copies, 1)
		if copies > 1 {
			c.connect(ctx, copies)
		}
		// The copies are sent together: on a busy machine, goroutines that each dialled on
		// their own could arrive one after the other, after the first had finished.
		last := make([]Answer, copies)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range copies {
			wg.Go(func() { <-start; last[i] = c.checkout(ctx, *step.Checkout, copyName(i, copies)) })
		}
		close(start)
		wg.Wait()
		if want := step.Checkout.Expect; want != "" {
			for _, a := range last {
				if got, _ := a.Body["error"].(string); got != want {
					return fmt.Errorf("checkout %s: the last answer was %s, want %s", step.Checkout.Key, answerDetail(a), want)
				}
			}
		}
	case step.Restart:
		if t.restart == nil {
			return errors.New("a Restart step needs a crash scenario's stack")
		}
		died, err := t.restart(ctx)
		if err != nil {
			return err
		}
		for _, k := range c.usedKeys() {
			c.recordAt(died, models.ActorShop, models.JournalCrash, k[0], k[1], fmt.Sprintf(
				"killed: the shop process died (SIGKILL) at the crash point %s", t.crashAt))
			c.recordAs(models.ActorShop, models.JournalCrash, k[0], k[1],
				"restarted: a new shop process is up on the same database, without the crash point")
		}
	case step.ExpireKeys:
		// The real reaper, with the clock moved past the retention: every completed key goes.
		reaper := &payments.Reaper{Store: models.NewIdempotencyStore(t.db), Retention: 0}
		n, err := reaper.RunOnce(ctx)
		if err != nil {
			return fmt.Errorf("expire keys: %w", err)
		}
		if n.Keys == 0 && !t.keepsNoKeys { // without server idempotency there is no key to reap
			return errors.New("expire keys: the reaper deleted no key, so the retry would not be past the retention")
		}
		for _, k := range c.usedKeys() {
			c.recordAs(models.ActorShop, models.JournalReaper, k[0], k[1], fmt.Sprintf(
				"reaped: the retention has passed; %d completed key(s) and their stored answers are deleted", n.Keys))
		}
	case step.Triage != nil:
		return c.triage(ctx, t, *step.Triage)
	case step.Wait > 0:
		select {
		case <-time.After(step.Wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// connect opens n connections to the shop (n requests at once for /healthz), which the
// client's transport keeps for the requests that follow.
func (c *client) connect(ctx context.Context, n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.shop+"/healthz", nil)
			if err != nil {
				return
			}
			if res, err := c.http.Do(req); err == nil {
				io.Copy(io.Discard, res.Body) // read to the end, or the connection is not kept
				res.Body.Close()
			}
		})
	}
	wg.Wait()
}

// copyName names copy i of n identical requests in the client's record ("copy 2 of 20"), so
// that each answer is matched with its own request; "" for a single request.
func copyName(i, n int) string {
	if n == 1 {
		return ""
	}
	return fmt.Sprintf(" (copy %d of %d)", i+1, n)
}

// checkout sends one checkout and, if ch.Retry, retries until a final answer. It returns the
// last answer. copy names the copy in the client's record.
func (c *client) checkout(ctx context.Context, ch lab.Checkout, copy string) Answer {
	tenant := ch.Tenant
	if tenant == "" {
		tenant = "acme"
	}
	body := CheckoutBody(ch, c.email())
	send := func(key string) Answer {
		return Post(ctx, c.http, c.shop+"/api/v1/checkout", c.apiKeys[tenant], key, body)
	}
	if ch.Browser {
		tab, err := c.openTab(ctx, tenant, ch)
		if err != nil {
			c.record(tenant, c.runID+"-"+ch.Key, "could not open the storefront: "+err.Error())
			return Answer{Err: err}
		}
		send = func(key string) Answer { return tab.submit(ctx, key) }
	}
	key := c.runID + "-" + ch.Key
	var a Answer
	for attempt := 1; attempt <= 25 && ctx.Err() == nil; attempt++ {
		c.mu.Lock()
		c.sent[tenant+"/"+key] = true
		c.mu.Unlock()
		c.record(tenant, key, fmt.Sprintf("sent attempt %d with key %s%s", attempt, key, copy))
		a = send(key)
		c.record(tenant, key, answerDetail(a)+copy)
		if a.Err == nil && (a.Status < 300 || a.Status == http.StatusPaymentRequired) {
			c.note(tenant, key, a.OrderID())
		}
		if a.Final() || !ch.Retry {
			return a
		}
		// Back off as the shop asks (Retry-After), within 0.3–2 s.
		time.Sleep(min(max(a.RetryAfter, 300*time.Millisecond), 2*time.Second))
		if !c.sameKey {
			key = fmt.Sprintf("%s-%s-retry-%d", c.runID, ch.Key, attempt) // the client's bug
		}
	}
	return a
}

// note records that an answer under tenant/key named the order id.
func (c *client) note(tenant, key, id string) {
	if id == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := tenant + "/" + key
	if c.answers[k] == nil {
		c.answers[k] = map[string]bool{}
	}
	c.answers[k][id] = true
}

// tab is one browser tab on the storefront: a session and its cart, and the checkout form it
// was shown, which it submits as checkout.js does — the form's fields, the key in the
// Idempotency-Key header, and a JSON answer.
type tab struct {
	shop, tenant string
	http         *http.Client // with a cookie jar: the session and CSRF cookies
	form         url.Values
}

// openTab returns the tab of the run's Browser steps, opening it the first time: a session,
// the cart filled with ch's items, the checkout form's cart id. Later steps reuse it: the
// same tab submitting the same form again.
func (c *client) openTab(ctx context.Context, tenant string, ch lab.Checkout) (*tab, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tab != nil {
		return c.tab, nil
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	t := &tab{shop: c.shop, tenant: tenant, http: &http.Client{
		Transport: c.http.Transport, Jar: jar, Timeout: c.http.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	base := c.shop + "/shop/" + tenant
	if _, err := t.do(ctx, http.MethodGet, base, nil, nil); err != nil { // a session and a CSRF cookie
		return nil, err
	}
	shopURL, _ := url.Parse(c.shop)
	csrf := ""
	for _, ck := range jar.Cookies(shopURL) {
		if ck.Name == "checkoutlab_csrf" {
			csrf = ck.Value
		}
	}
	for _, it := range items(ch) {
		add := url.Values{"_csrf": {csrf}, "sku": {fmt.Sprint(it["sku"])}, "quantity": {fmt.Sprint(it["quantity"])}}
		if _, err := t.do(ctx, http.MethodPost, base+"/cart/items", add, nil); err != nil {
			return nil, err
		}
	}
	page, err := t.do(ctx, http.MethodGet, base+"/checkout", nil, nil)
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile(`name="cart_id" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		return nil, errors.New("the checkout form has no cart_id: is the cart empty?")
	}
	t.form = url.Values{"_csrf": {csrf}, "cart_id": {string(m[1])}, "email": {c.email()},
		"name": {"Ada Lovelace"}, "address": {"1 Analytical Way"}, "city": {"London"},
		"postal_code": {"N1 9GU"}, "country": {"GB"}, "shipping_method": {"standard"}, "card_number": {card(ch)}}
	c.tab = t
	return t, nil
}

// submit posts the checkout form under key and reads the JSON answer.
func (t *tab) submit(ctx context.Context, key string) Answer {
	form := maps.Clone(t.form)
	form.Set("idempotency_key", key)
	var a Answer
	_, err := t.do(ctx, http.MethodPost, t.shop+"/shop/"+t.tenant+"/checkout", form, func(res *http.Response) {
		a = readAnswer(res)
	}, "Idempotency-Key", key, "Prefer", PreferWait, "Accept", "application/json")
	if err != nil {
		return Answer{Err: err}
	}
	return a
}

// do sends one storefront request (a form post if form is set) and returns the body; seen,
// if set, sees the response first. Extra headers come as name, value pairs.
func (t *tab) do(ctx context.Context, method, target string, form url.Values, seen func(*http.Response), headers ...string) ([]byte, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	oneAttempt(req)
	res, err := t.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if seen != nil {
		seen(res)
	} else if res.StatusCode >= 400 {
		return nil, fmt.Errorf("%s %s: %d", method, target, res.StatusCode)
	}
	return io.ReadAll(res.Body)
}

// email is the customer's address on every order of the run: one per run, so the judge can
// tell the run's orders from anybody else's on a shop that is already running.
func (c *client) email() string { return "lab+" + c.runID + "@example.com" }
