package payments

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"checkoutlab/models"
)

// Journal records what operations, webhooks and workers did, for the ops view of an order.
// *models.JournalStore is one. It is optional everywhere: a nil Journal records nothing.
type Journal interface {
	// RecordTx appends inside the transaction of the phase they describe, in one INSERT.
	RecordTx(tx *gorm.DB, evs ...models.JournalEvent) error
	// Record appends in a statement of its own, best effort; never call it with a
	// transaction open (SQLite has one connection).
	Record(ctx context.Context, ev models.JournalEvent)
}

func recordTx(j Journal, tx *gorm.DB, evs ...models.JournalEvent) error {
	if j == nil || len(evs) == 0 {
		return nil
	}
	return j.RecordTx(tx, evs...)
}

func record(j Journal, ctx context.Context, ev models.JournalEvent) {
	if j != nil {
		j.Record(ctx, ev)
	}
}

// keyName is the client's key string of an operation's key, if the key can say.
func keyName(k Key) string {
	if n, ok := k.(interface{ Key() string }); ok {
		return n.Key()
	}
	return ""
}

// chargeDetail words a charge result for the journal: the classified outcome first, then the
// charge and decline code. Never the card, never the raw error (it may quote a URL or a body).
func chargeDetail(r ChargeResult) string {
	d := r.Outcome.String()
	if r.Charge != nil {
		d += fmt.Sprintf(": charge %s (%s)", r.Charge.ID, r.Charge.Status)
	}
	if r.DeclineCode != "" {
		d += ", decline code " + r.DeclineCode
	}
	if r.StatusCode != 0 {
		d += fmt.Sprintf(", HTTP %d", r.StatusCode)
	}
	switch r.Outcome {
	case OutcomeUnknown:
		d += ": no usable answer; the charge may exist, the payment stays pending"
	case OutcomeNotCharged:
		d += ": the gateway made no charge"
	}
	return d
}
