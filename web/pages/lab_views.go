package pages

import (
	"strconv"

	"checkoutlab/web/layout"
)

// The view models of the failure lab's pages (lab.templ). Handlers fill them from a run's
// result; the templates only lay them out.

// LabScenario is one scenario of the failure lab's catalogue.
type LabScenario struct {
	Name, Title, RealLife, Mechanism, Switch, Breaks string
	Links                                            []LabLink
	RunURL                                           string // POST target, with mode=protected|unprotected
	Command                                          string // the CLI command that runs it
	CompareURL                                       string
	// Last is the latest kept run of each mode, if any.
	LastUnprotected, LastProtected *LabRunSummary
}

// LabLink is a scenario's code or doc reference, a path in the repository.
type LabLink struct{ Path string }

// LabFamily is one group of the catalogue.
type LabFamily struct {
	Name, Title string
	Scenarios   []LabScenario
}

// LabCataloguePage lists the scenarios by family, each runnable with its protection off and on.
type LabCataloguePage struct {
	Layout     layout.Page
	CSRF       string
	Families   []LabFamily
	GatewayURL string
	Busy       bool // a run is going: every run button is disabled
	RunningURL string
}

// LabBusyPage answers a run asked for while another is running.
type LabBusyPage struct {
	Layout       layout.Page
	CatalogueURL string
	RunningURL   string
}

// LabRunSummary is one kept run in a list.
type LabRunSummary struct {
	ID, URL, Scenario, Title, Mode, When string
	Running, OK, Harm                    bool
	Headline                             string
}

// LabRunsPage is /lab/runs.
type LabRunsPage struct {
	Layout layout.Page
	Runs   []LabRunSummary
}

// LabVerdict is what happened to the customer, in money.
type LabVerdict struct {
	Mode, Outcome, Currency string
	Overcharge              int64
	Headline                string // "Charged twice: 2 × $28.00 for one order"
	Tag                     string // "expected with protection off"
	Judgement               string // the lab's verdict on the run: reproduced, prevented, BUG
	Harm, OK                bool
}

// LabRunPage is one run's result, or a run still going (Running).
type LabRunPage struct {
	Layout          layout.Page
	CSRF            string
	ID              string
	Scenario        LabScenario
	Mode, ModeLabel string
	Running         bool
	Interrupted     bool // the shop stopped during the run
	Busy            bool
	Present         bool
	Prompts         []string // "ask the room", for presenter mode
	Off, Database   string
	Seed            string
	Settings        []LabSetting
	Verdict         LabVerdict
	Err             string
	Unsettled       string // background work still going on when the lab stopped waiting
	Took            string
	Checks          []LabCheck
	Timeline        LabTimeline
	// The run's own evidence and exports.
	LedgerURL, DeliveriesURL, ReconciliationURL, JSONURL, MermaidURL, PresentURL, PageURL string
	CatalogueURL, RunsURL                                                                 string
}

// LabSetting is one setting of the run's stack.
type LabSetting struct{ Name, Value string }

// LabCheck is one invariant's outcome.
type LabCheck struct {
	Invariant string
	Holds     bool
	Detail    string
}

// LabTimeline is a run's timeline: lanes left to right, then one row per event.
type LabTimeline struct {
	Lanes []string
	Rows  []LabTimelineRow
}

// LabTimelineRow is one event of the timeline, or a break for a long gap (Gap set).
type LabTimelineRow struct {
	Gap                 string // "1.7 s later"
	Index               int
	Time                string
	Kind, Label         string
	Detail              string
	Lane                string
	Message             int    // index in the run's messages, -1 for none
	MessageKind         string // request, response, webhook, job; "" for a mark or a step
	From, To            string
	Start, Span         int // the columns the arrow (or the mark) covers, 0-based, and how many
	Leftward, Mark      bool
	Decisive            bool
	Tone                string
	ChargeID, ChargeURL string
	Key, Order          string
	Prompt              string // presenter mode asks this before revealing the row
}

// LabLedgerPage is a run's own snapshot of the gateway's ledger.
type LabLedgerPage struct {
	Layout  layout.Page
	Title   string
	RunURL  string
	Charges []LabChargeRow
}

// LabChargeRow is one charge of a run's ledger.
type LabChargeRow struct {
	ID, Status, Amount, Key, Order, Payment string
	Harm                                    bool
}

// LabDeliveriesPage is a run's own snapshot of the gateway's webhook deliveries.
type LabDeliveriesPage struct {
	Layout     layout.Page
	Title      string
	RunURL     string
	Deliveries []LabDeliveryRow
}

// LabDeliveryRow is one webhook delivery.
type LabDeliveryRow struct{ Event, Type, Charge, Status, Created, Attempts string }

// LabReconciliationPage is a run's own reconciliation report, taken when the run ended.
type LabReconciliationPage struct {
	Layout   layout.Page
	Title    string
	RunURL   string
	Missing  bool
	Lines    []LabCheck // one per list of the report: holds when it is empty
	Counts   string
	Findings []string
}

// LabComparePage shows the latest unprotected and protected runs of one scenario side by side.
type LabComparePage struct {
	Layout      layout.Page
	Scenario    LabScenario
	Unprotected *LabRunPage
	Protected   *LabRunPage
}

func itoa(i int) string { return strconv.Itoa(i) }

func itoa64(i int64) string { return strconv.FormatInt(i, 10) }
