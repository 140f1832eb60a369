package labrun

// A run's timeline as real messages. The evidence comes from three places that each saw part
// of the run: the client's own attempts and answers, the shop's journal (what each request,
// webhook and job did, written where it happened), and the gateway's ledger and delivery log
// (which the gateway keeps even when the shop that made a charge was killed before it wrote
// a word). Each message is drawn from its real sender to its real receiver, and a response
// goes back along the request it answers; what was done to a process (a crash, a restart,
// the reaper) and an answer that never arrived are marks on a lane, not arrows.

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"checkoutlab/models"
	"checkoutlab/payments/lab"
	"checkoutlab/web/components"
)

// money formats an amount as the shop's pages do.
var money = components.Money

// actorLane is the lane of a journal actor: the outbox and the completer are the shop's
// background jobs.
var actorLane = map[string]string{
	models.ActorClient: "client", models.ActorShop: "shop", models.ActorDatabase: "database",
	models.ActorGateway: "gateway", models.ActorWebhook: "shop",
	models.ActorOutbox: "jobs", models.ActorCompleter: "jobs",
}

var (
	attemptRe = regexp.MustCompile(`^sent attempt (\d+)`)
	copyRe    = regexp.MustCompile(` \(copy (\d+) of \d+\)$`)
	chargeRe  = regexp.MustCompile(`\bch_[a-z0-9]+`)
	eventRe   = regexp.MustCompile(`\bevt_[a-z0-9]+`)
)

// Timeline builds the events and messages of res from its journal, ledger and deliveries.
// paidOrders is how many orders the customers meant to pay: a charge of an order beyond them,
// like a second charge of one order, is harm.
func Timeline(res lab.Result, paidOrders int) ([]lab.Event, []lab.Message) {
	b := &timeline{open: map[string]int{}, chargeReq: map[string]int{}, answered: map[int]bool{},
		owner: map[string]string{}, keyOf: map[string]string{}}
	for _, r := range res.Timeline {
		if r.Order != "" && r.Key != "" {
			b.keyOf[r.Order] = r.Key
		}
	}
	for _, d := range b.draft(res, paidOrders) {
		b.add(d)
	}
	if len(b.events) > 0 {
		first := b.events[0].At
		for i := range b.events {
			b.events[i].AtMS = b.events[i].At.Sub(first).Milliseconds()
		}
		for i := range b.messages {
			b.messages[i].AtMS = b.events[b.msgEvent[i]].AtMS
		}
	}
	return b.events, b.messages
}

// draft is one piece of evidence, in time order, before it becomes events.
type draft struct {
	at     time.Time
	row    *lab.Row    // a journal or client event
	charge *lab.Charge // a ledger entry
	harm   bool        // the charge took money it should not have
	lost   *lab.Delivery
}

// draft orders the evidence in time. A ledger entry has only a time in seconds; the gateway
// enqueues a charge's webhooks as it makes it, so its first delivery dates it to the
// millisecond. Failing that, it goes just before the first journal line that names it.
func (b *timeline) draft(res lab.Result, paidOrders int) []draft {
	var ds []draft
	firstDelivery := map[string]time.Time{}
	delivered := map[string]bool{} // webhook events the shop's journal recorded
	for _, r := range res.Timeline {
		for _, id := range eventRe.FindAllString(r.Detail, -1) {
			delivered[id] = true
		}
	}
	for i, d := range res.Deliveries {
		if t, ok := firstDelivery[d.ChargeID]; !ok || d.Created.Before(t) {
			firstDelivery[d.ChargeID] = d.Created
		}
		if !delivered[d.EventID] && !deliveredOK(d) {
			ds = append(ds, draft{at: lastAttempt(d), lost: &res.Deliveries[i]})
		}
	}
	named := map[string]time.Time{}
	for _, r := range res.Timeline {
		for _, id := range chargeRe.FindAllString(r.Detail, -1) {
			if _, ok := named[id]; !ok {
				named[id] = r.At
			}
		}
	}
	seenOrders, chargesOf := []string{}, map[string]int{}
	for i, c := range res.Ledger {
		at, ok := firstDelivery[c.ID]
		if !ok {
			if at, ok = named[c.ID]; ok {
				at = at.Add(-time.Microsecond)
			} else {
				at = time.Unix(c.Created, 0).UTC()
			}
		}
		harm := false
		if c.MoneyMoved() {
			o := c.Metadata["order_id"]
			if chargesOf[o] == 0 {
				seenOrders = append(seenOrders, o)
			}
			chargesOf[o]++
			harm = chargesOf[o] > 1 || len(seenOrders) > paidOrders
		}
		ds = append(ds, draft{at: at.Add(-time.Microsecond), charge: &res.Ledger[i], harm: harm})
	}
	for i := range res.Timeline {
		ds = append(ds, draft{at: res.Timeline[i].At, row: &res.Timeline[i]})
	}
	slices.SortStableFunc(ds, func(a, b draft) int { return a.at.Compare(b.at) })
	return ds
}

func deliveredOK(d lab.Delivery) bool {
	for _, a := range d.Attempts {
		if a.StatusCode >= 200 && a.StatusCode < 300 {
			return true
		}
	}
	return false
}

func lastAttempt(d lab.Delivery) time.Time {
	if n := len(d.Attempts); n > 0 {
		return d.Attempts[n-1].At
	}
	return d.Created
}

// timeline collects events and messages, and remembers which requests await an answer.
type timeline struct {
	events   []lab.Event
	messages []lab.Message
	msgEvent []int // the event of each message
	// open is the client's unanswered request per key; chargeReq the request that made each
	// ledger charge; answered the requests that have had their answer (or lost it).
	open      map[string]int
	chargeReq map[string]int
	answered  map[int]bool
	marks     map[string]bool
	// owner is who runs each key's operation now: "shop" (a request that reserved it) or
	// "jobs" (the completer, once it claimed it); keyOf is the key of each order.
	owner map[string]string
	keyOf map[string]string
}

// runner is the lane that runs the operation of key: the shop, unless the completer took it.
func (b *timeline) runner(key string) string {
	if o := b.owner[key]; o != "" {
		return o
	}
	return "shop"
}

// send adds ev as a message from → to of kind; answers is the request it answers, or -1.
func (b *timeline) send(ev lab.Event, from, to, kind string, answers int, ref string) int {
	ev.Lane, ev.Message = from, len(b.messages)
	b.messages = append(b.messages, lab.Message{From: from, To: to, Kind: kind, Label: ev.Label, Answers: answers, Ref: ref})
	b.msgEvent = append(b.msgEvent, len(b.events))
	b.events = append(b.events, ev)
	if answers >= 0 {
		b.answered[answers] = true
	}
	return ev.Message
}

// mark adds ev as a mark on lane (once: a crash is recorded under every key of the run).
func (b *timeline) mark(ev lab.Event, lane string) {
	id := lane + ev.Kind + ev.Detail + ev.At.String()
	if b.marks == nil {
		b.marks = map[string]bool{}
	}
	if b.marks[id] {
		return
	}
	b.marks[id] = true
	ev.Lane, ev.Message, ev.Mark = lane, -1, true
	b.events = append(b.events, ev)
}

// step adds ev as something done inside lane.
func (b *timeline) step(ev lab.Event, lane string) {
	ev.Lane, ev.Message = lane, -1
	b.events = append(b.events, ev)
}

func (b *timeline) add(d draft) {
	switch {
	case d.charge != nil:
		b.addCharge(*d.charge, d.at, d.harm)
	case d.lost != nil:
		dl := d.lost
		b.mark(lab.Event{At: d.at, Kind: "undelivered", ChargeID: dl.ChargeID, Tone: "fault",
			Label:  dl.EventType + " not delivered",
			Detail: fmt.Sprintf("webhook %s %s for charge %s: %s after %d attempt(s)", dl.EventType, dl.EventID, dl.ChargeID, dl.Status, len(dl.Attempts))}, "gateway")
	default:
		b.addRow(*d.row)
	}
}

// addCharge adds a ledger entry: the request that reached the gateway and made the charge.
func (b *timeline) addCharge(c lab.Charge, at time.Time, harm bool) {
	what := "charged " + money(c.Amount, c.Currency)
	if !c.MoneyMoved() {
		what = c.Status
		if c.FailureCode != "" {
			what += " (" + c.FailureCode + ")"
		}
	}
	ev := lab.Event{At: at, Kind: "charge", ChargeID: c.ID, Order: c.Metadata["order_id"],
		Label: "POST /charges: " + what,
		Detail: fmt.Sprintf("The gateway's ledger: charge %s, %s %s, status %s, under the gateway key %q, for order %s (payment %s).",
			c.ID, money(c.Amount, c.Currency), strings.ToUpper(c.Currency), c.Status, c.IdempotencyKey, c.Metadata["order_id"], c.Metadata["payment_id"])}
	if harm {
		ev.Decisive, ev.Tone = true, "harm"
		ev.Label = "second charge! " + what
		ev.Detail += " This charge took money the customer did not mean to pay."
	}
	b.chargeReq[c.ID] = b.send(ev, b.runner(b.keyOf[ev.Order]), "gateway", lab.MessageRequest, -1, c.ID)
}

// addRow adds one line of the journal, or of the client's own record.
func (b *timeline) addRow(r lab.Row) {
	ev := lab.Event{At: r.At, Kind: r.Kind, Key: r.Key, Order: r.Order, Detail: r.Detail, Label: short(r.Detail)}
	outcome, _, _ := strings.Cut(r.Detail, ":")
	switch {
	case r.Actor == models.ActorClient:
		b.addClient(ev, r)
	case r.Kind == models.JournalCrash:
		ev.Label = outcome
		if outcome == "killed" {
			ev.Decisive, ev.Tone, ev.Label = true, "harm", "killed (SIGKILL)"
		}
		b.mark(ev, "shop")
	case r.Kind == models.JournalReaper:
		ev.Label = "reaper: keys deleted"
		b.mark(ev, "jobs")
	case r.Kind == models.JournalReservation:
		ev.Label = "reserve key: " + outcome
		if strings.Contains(r.Detail, "replayed") || strings.Contains(r.Detail, "taken over") {
			ev.Tone = "recovery"
		}
		if outcome == "reserved" {
			b.owner[r.Key] = "shop" // this request runs the operation now
		}
		b.send(ev, "shop", "database", lab.MessageRequest, -1, r.Key)
	case r.Kind == models.JournalPhase:
		ev.Label = "COMMIT " + outcome
		b.send(ev, b.runner(r.Key), "database", lab.MessageRequest, -1, r.Key)
	case r.Kind == models.JournalDisposition:
		ev.Label = "key " + short(r.Detail)
		b.send(ev, b.runner(r.Key), "database", lab.MessageRequest, -1, r.Key)
	case r.Kind == models.JournalGatewayCharge:
		b.addChargeAnswer(ev, r, outcome)
	case r.Kind == models.JournalGatewayLookup:
		who := b.runner(r.Key)
		req := b.send(lab.Event{At: r.At, Kind: "lookup_request", Key: r.Key, Order: r.Order,
			Label: "GET /charges?key=…: what happened?", Detail: "The shop asks the gateway's ledger under the payment's gateway key before it charges again."},
			who, "gateway", lab.MessageRequest, -1, r.Order)
		ev.ChargeID = chargeRe.FindString(r.Detail)
		if strings.HasPrefix(r.Detail, "found") {
			ev.Decisive, ev.Tone = true, "recovery"
		}
		b.send(ev, "gateway", who, lab.MessageResponse, req, r.Order)
	case r.Kind == models.JournalWebhook:
		ev.ChargeID = chargeRe.FindString(r.Detail)
		ev.Label = webhookLabel(r.Detail, outcome)
		if outcome == "duplicate" || outcome == "no_change" {
			ev.Tone = "recovery"
		}
		b.send(ev, "gateway", "shop", lab.MessageWebhook, -1, eventRe.FindString(r.Detail))
	case r.Kind == models.JournalReceipt || r.Kind == models.JournalShipment:
		ev.Label = r.Kind + ": " + outcome
		if outcome == "deduplicated" {
			ev.Tone = "recovery"
		}
		b.send(ev, "jobs", "database", lab.MessageJob, -1, r.Kind+" "+r.Order)
	case r.Kind == models.JournalClaim:
		ev.Label = "claim: " + outcome
		ev.Tone = "recovery"
		if outcome == "claimed" {
			b.owner[r.Key] = "jobs" // the completer runs the operation now
		}
		b.send(ev, "jobs", "database", lab.MessageJob, -1, r.Key)
	default:
		lane := actorLane[r.Actor]
		if lane == "" {
			lane = "shop"
		}
		b.step(ev, lane)
	}
}

// addClient adds what the client sent and saw.
func (b *timeline) addClient(ev lab.Event, r lab.Row) {
	// Identical copies sent at once share a key: each answer goes with its own copy's request.
	who, copy := r.Key, ""
	if m := copyRe.FindStringSubmatch(r.Detail); m != nil {
		who, copy = r.Key+" copy "+m[1], " · copy "+m[1]
	}
	if m := attemptRe.FindStringSubmatch(r.Detail); m != nil {
		ev.Label = "POST checkout · attempt " + m[1] + copy
		b.open[who] = b.send(ev, "client", "shop", lab.MessageRequest, -1, who+" #"+m[1])
		return
	}
	req, ok := b.open[who]
	if !ok {
		b.step(ev, "client")
		return
	}
	delete(b.open, who)
	if strings.HasPrefix(r.Detail, "no answer") {
		b.answered[req] = true
		ev.Kind, ev.Tone, ev.Label = "lost", "fault", "no answer: connection lost"
		b.mark(ev, "client")
		return
	}
	ev.Kind = "answer"
	if strings.HasPrefix(r.Detail, "answer 2") {
		ev.Tone = "recovery"
	}
	b.send(ev, "shop", "client", lab.MessageResponse, req, b.messages[req].Ref)
}

// addChargeAnswer adds the shop's record of the gateway's answer to a charge request: the
// answer itself, or a mark where it never arrived.
func (b *timeline) addChargeAnswer(ev lab.Event, r lab.Row, outcome string) {
	ev.Kind = "charge_answer"
	id := chargeRe.FindString(r.Detail)
	req, ok := b.chargeReq[id]
	if !ok || b.answered[req] {
		ok = false
		// The answer names no charge (it was lost): it answers the latest unanswered
		// request that charged this order.
		for i := len(b.messages) - 1; i >= 0; i-- {
			e := b.events[b.msgEvent[i]]
			if e.Kind == "charge" && e.Order == r.Order && !b.answered[i] {
				req, ok = i, true
				break
			}
		}
	}
	if !ok {
		// No charge in the ledger: the gateway refused before charging (a 503, say). The
		// shop's journal is the evidence that the request was sent.
		req = b.send(lab.Event{At: r.At, Kind: "charge_request", Key: r.Key, Order: r.Order,
			Label: "POST /charges", Detail: "The shop asks the gateway to charge the card; the gateway made no charge."},
			b.runner(r.Key), "gateway", lab.MessageRequest, -1, r.Order)
	}
	asked := b.messages[req].From // the answer goes back to whoever asked
	if outcome == "unknown" {
		b.answered[req] = true
		ev.Tone, ev.Label = "fault", "no answer from the gateway"
		b.mark(ev, asked)
		return
	}
	ev.ChargeID = id
	ev.Label = "answer: " + short(r.Detail)
	b.send(ev, "gateway", asked, lab.MessageResponse, req, b.messages[req].Ref)
}

// webhookLabel is "charge.succeeded → applied".
func webhookLabel(detail, outcome string) string {
	for _, f := range strings.Fields(detail) {
		if strings.HasPrefix(f, "charge.") || strings.HasPrefix(f, "refund.") {
			return f + " → " + outcome
		}
	}
	return "webhook → " + outcome
}

// short is the first clause of a detail, for the diagram; the full text is one click away.
func short(detail string) string {
	s := detail
	if i := strings.IndexAny(s, ",;("); i > 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > 60 {
		s = string(r[:59]) + "…"
	}
	return s
}
