package fakegateway

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

//go:embed page.html
var pageFiles embed.FS

var pageTemplate = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"money":  money,
	"clock":  func(t time.Time) string { return t.UTC().Format("15:04:05") },
	"unix":   func(unix int64) time.Time { return time.Unix(unix, 0) },
	"digits": cardDigits,
}).ParseFS(pageFiles, "page.html"))

// pageView is everything the page shows; the template does no I/O.
type pageView struct {
	Error string // one of pageErrors, never text from the request
	CSRF  string // the session's CSRF token, a hidden field of every form
	// Notice confirms what the last form did ("Armed commit_then_drop…"). It is written here
	// from the database, found by the id in the URL: no text travels in the URL.
	Notice string
	// ShopURL is the shop's base URL (from the webhook URL), for the header's links and the
	// order links; "" when the gateway delivers no webhooks.
	ShopURL      string
	Armed        []faultLine
	History      []faultLine
	Groups       []faultGroup
	Charges      []ledgerLine
	DoubleOrders []string
	Deliveries   []Delivery
	TestCards    []testCardView
	Updated      time.Time
}

// ledgerLine is a charge with a flag for orders that were charged more than once, and the
// faults that struck it.
type ledgerLine struct {
	Charge
	OrderID string
	Double  bool
	Struck  []string
}

// faultLine is an armed fault, or a spent or disarmed one, with what it struck.
type faultLine struct {
	Fault
	Params     string // the parameters that apply to it, e.g. "delay_ms=3000"
	Hits       []hitView
	Armed      time.Time
	Disarmed   bool
	DisarmedAt time.Time
}

type hitView struct {
	ChargeID, OrderID, Key string
	At                     time.Time
}

// faultGroup is a heading of the fault panel and the forms under it.
type faultGroup struct {
	Title, Explain string
	Forms          []faultForm
}

// faultForm is one fault's form: its parameters (faultSpec) and what it stands for.
type faultForm struct {
	faultSpec
	Why          string
	DelayDefault int
	StatusHint   string
	DeclineCodes []string
}

type testCardView struct{ Number, Behaviour string }

// faultGroups arranges the fault panel by where a fault strikes, with what each one stands
// for in plain words and what to watch when it is armed.
var faultGroups = []struct {
	title, explain string
	faults         []string
}{
	{"Before the charge", "Nothing is charged when these strike: the answer is late, an error, or never comes.",
		[]string{faultLatency, faultErrorBeforeCommit, faultTimeoutBeforeCommit}},
	{"After the charge", "The money has moved; what goes wrong is the answer. These are the double charges waiting to happen.",
		[]string{faultCommitThenDrop, faultCommitThenDelay, faultCommitThenError}},
	{"Answers and keys", "A final refusal, and a provider that forgets idempotency keys.",
		[]string{faultDecline, faultIgnoreIdempotencyKey}},
	{"Webhooks", "The events that tell the shop what happened: late, twice, out of order, or refused.",
		[]string{faultWebhookDuplicate, faultWebhookReorder, faultWebhookDelay, faultWebhookFail}},
}

var faultWhy = map[string]string{
	faultLatency:              "A slow provider. The checkout keeps saying it is placing the order, then succeeds once.",
	faultErrorBeforeCommit:    "The provider is down. Nothing is charged and the shop says so; a retry with the same key charges once.",
	faultTimeoutBeforeCommit:  "The provider hangs, then closes without charging. For the shop the outcome is unknown: it asks before it charges again.",
	faultCommitThenDrop:       "The lost response: charged, but the answer never arrives. The shop's retry with the same key gets the same charge back.",
	faultCommitThenDelay:      "The late response: charged, but the answer comes after the shop's timeout. The shop looks the charge up instead of charging again.",
	faultCommitThenError:      "Charged, then an error. A 5xx promises nothing, so the shop must check before it charges again.",
	faultDecline:              "The card is refused: a final answer, stored and replayed. The order page offers another card.",
	faultIgnoreIdempotencyKey: "A provider without idempotency: every retry is a new charge. Arm it with a lost response and watch the ledger flag the double charge.",
	faultWebhookDuplicate:     "Every event of the next charge arrives several times; the shop applies each once (see the deliveries).",
	faultWebhookReorder:       "The next charge's events arrive newest first; the payment's status never moves back.",
	faultWebhookDelay:         "The next charge's webhooks come late, after the response: whichever arrives first settles the payment.",
	faultWebhookFail:          "Delivery attempts fail as if the shop were down; the gateway retries with backoff until it answers 2xx.",
}

// page handles GET /: armed faults, the fault panel, the ledger, the delivery log and the
// fault history. With ?partial=live it renders only the live parts, which the page's small
// script swaps in every two seconds.
func (g *Gateway) page(c echo.Context) error {
	v, err := g.pageView(c.Request().Context())
	if err != nil {
		return err
	}
	v.Error = pageErrors[c.QueryParam("error")]
	v.CSRF, _ = c.Get(csrfContextKey).(string)
	v.Notice = g.notice(c.Request().Context(), c.QueryParam("armed"), c.QueryParam("disarmed"))
	name := "page"
	if c.QueryParam("partial") == "live" {
		name = "live"
	}
	// Render into a buffer first, so a template error never leaves half a page.
	var buf bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&buf, name, v); err != nil {
		return fmt.Errorf("render page: %w", err)
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return c.HTMLBlob(http.StatusOK, buf.Bytes())
}

func (g *Gateway) pageView(ctx context.Context) (pageView, error) {
	v := pageView{ShopURL: originOf(g.cfg.WebhookURL), Updated: g.now()}
	var rows []chargeRow
	if err := g.db.WithContext(ctx).Order("created_at DESC, id DESC").Limit(500).Find(&rows).Error; err != nil {
		return v, fmt.Errorf("load ledger: %w", err)
	}
	armed, err := g.armedFaults(ctx)
	if err != nil {
		return v, err
	}
	history, err := g.faultHistory(ctx, 30)
	if err != nil {
		return v, err
	}
	var faultIDs []int64
	for _, f := range armed {
		faultIDs = append(faultIDs, f.ID)
	}
	for _, f := range history {
		faultIDs = append(faultIDs, f.ID)
	}
	chargeIDs, keys := make([]string, 0, len(rows)), make([]string, 0, len(rows))
	orderOf := map[string]string{}
	for _, r := range rows {
		chargeIDs, keys = append(chargeIDs, r.ID), append(keys, r.IdempotencyKey)
		orderOf[r.ID] = r.OrderID
	}
	hits, err := g.hitsOf(ctx, faultIDs, chargeIDs, keys)
	if err != nil {
		return v, err
	}

	// Which faults struck each charge: by its id, or (before any charge existed) an earlier
	// attempt under its idempotency key.
	onCharge, onKey, ofFault := map[string][]string{}, map[string][]string{}, map[int64][]hitView{}
	for _, h := range hits {
		label := h.Fault
		if h.FaultID == nil {
			label = "card: " + h.Fault
		}
		if h.ChargeID != "" {
			onCharge[h.ChargeID] = append(onCharge[h.ChargeID], label)
		} else if h.IdempotencyKey != "" {
			onKey[h.IdempotencyKey] = append(onKey[h.IdempotencyKey], "earlier attempt: "+label)
		}
		if h.FaultID != nil {
			ofFault[*h.FaultID] = append(ofFault[*h.FaultID], hitView{ChargeID: h.ChargeID,
				OrderID: orderOf[h.ChargeID], Key: h.IdempotencyKey, At: h.CreatedAt})
		}
	}
	succeeded := map[string]int{}
	for _, r := range rows {
		if r.Status == statusSucceeded && r.OrderID != "" {
			succeeded[r.OrderID]++
		}
	}
	for _, r := range rows {
		struck := append(append([]string{}, onKey[r.IdempotencyKey]...), onCharge[r.ID]...)
		v.Charges = append(v.Charges, ledgerLine{Charge: r.view(), OrderID: r.OrderID, Double: succeeded[r.OrderID] > 1, Struck: struck})
	}
	for order, n := range succeeded {
		if n > 1 {
			v.DoubleOrders = append(v.DoubleOrders, order)
		}
	}
	sort.Strings(v.DoubleOrders)
	for _, f := range armed {
		v.Armed = append(v.Armed, faultLine{Fault: f, Params: params(f), Hits: ofFault[f.ID], Armed: time.Unix(f.Created, 0)})
	}
	for _, r := range history {
		f := r.view()
		line := faultLine{Fault: f, Params: params(f), Hits: ofFault[f.ID], Armed: r.CreatedAt}
		if r.DisarmedAt != nil {
			line.Disarmed, line.DisarmedAt = true, *r.DisarmedAt
		}
		v.History = append(v.History, line)
	}
	if v.Deliveries, err = g.deliveries(ctx, 100); err != nil {
		return v, err
	}
	v.Groups = panelGroups()
	for number, b := range testCards {
		v.TestCards = append(v.TestCards, testCardView{Number: number, Behaviour: b})
	}
	sort.Slice(v.TestCards, func(i, j int) bool { return v.TestCards[i].Number < v.TestCards[j].Number })
	return v, nil
}

// notice confirms the last form action, looked up by the fault id in ?armed= or ?disarmed=.
func (g *Gateway) notice(ctx context.Context, armed, disarmed string) string {
	if disarmed == "all" {
		return "Every armed fault is disarmed. They are listed under the fault history."
	}
	id, err := strconv.ParseInt(armed+disarmed, 10, 64)
	if err != nil || (armed != "" && disarmed != "") {
		return ""
	}
	var row faultRow
	if err := g.db.WithContext(ctx).Where("id = ?", id).Take(&row).Error; err != nil {
		return ""
	}
	if disarmed != "" {
		return fmt.Sprintf("Disarmed %s (#%d). It is listed under the fault history.", row.Fault, row.ID)
	}
	next := "the next request"
	if row.Times > 1 {
		next = fmt.Sprintf("the next %d requests", row.Times)
	}
	if row.Probability < 1 {
		next += fmt.Sprintf(", each with probability %g", row.Probability)
	}
	return fmt.Sprintf("Armed %s (#%d): it strikes %s it applies to. It is listed under Armed faults, where you can disarm it.",
		row.Fault, row.ID, next)
}

// panelGroups is the fault panel: every fault once, under its group.
func panelGroups() []faultGroup {
	codes := make([]string, 0, len(declineCodes))
	for code := range declineCodes {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	var out []faultGroup
	for _, grp := range faultGroups {
		fg := faultGroup{Title: grp.title, Explain: grp.explain}
		for _, name := range grp.faults {
			spec, _ := specOf(name)
			form := faultForm{faultSpec: spec, Why: faultWhy[name], DeclineCodes: codes, DelayDefault: 1000}
			if name == faultTimeoutBeforeCommit || name == faultCommitThenDelay {
				form.DelayDefault = int(DefaultFaultDelay / time.Millisecond)
			}
			form.StatusHint = "default 503"
			if name == faultCommitThenError {
				form.StatusHint = "default 500, a 5xx but 503"
			}
			fg.Forms = append(fg.Forms, form)
		}
		out = append(out, fg)
	}
	return out
}

// params writes the parameters a fault was armed with, e.g. "delay_ms=3000 status=503".
func params(f Fault) string {
	var p []string
	if f.DelayMS != 0 {
		p = append(p, "delay_ms="+strconv.Itoa(f.DelayMS))
	}
	if f.Status != 0 {
		p = append(p, "status="+strconv.Itoa(f.Status))
	}
	if f.Copies != 0 {
		p = append(p, "copies="+strconv.Itoa(f.Copies))
	}
	if f.Code != "" {
		p = append(p, "code="+f.Code)
	}
	return strings.Join(p, " ")
}

// originOf returns scheme://host of a URL, or "" if it has none.
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
