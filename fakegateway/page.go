package fakegateway

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"time"

	"github.com/labstack/echo/v4"
)

//go:embed page.html
var pageFiles embed.FS

var pageTemplate = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"money": func(amount int64, currency string) string {
		return fmt.Sprintf("%d.%02d %s", amount/100, amount%100, currency)
	},
	"clock": func(unix int64) string { return time.Unix(unix, 0).UTC().Format("15:04:05") },
}).ParseFS(pageFiles, "page.html"))

// pageView is everything the page shows; the template does no I/O.
type pageView struct {
	Error        string // one of pageErrors, never text from the request
	CSRF         string // the session's CSRF token, a hidden field of every form
	Charges      []ledgerLine
	DoubleOrders []string
	Deliveries   []Delivery
	Faults       []Fault
	Specs        []faultSpec
	TestCards    []testCardView
}

// ledgerLine is a charge with a flag for orders that were charged more than once.
type ledgerLine struct {
	Charge
	OrderID string
	Double  bool
}

type testCardView struct{ Number, Behaviour string }

// page handles GET /: the ledger, the delivery log and the fault panel. With ?partial=live it
// renders only the live part, which the page's small script swaps in every two seconds.
func (g *Gateway) page(c echo.Context) error {
	ctx := c.Request().Context()
	var rows []chargeRow
	if err := g.db.WithContext(ctx).Order("created_at DESC, id DESC").Limit(500).Find(&rows).Error; err != nil {
		return fmt.Errorf("load ledger: %w", err)
	}
	succeeded := map[string]int{}
	for _, r := range rows {
		if r.Status == statusSucceeded && r.OrderID != "" {
			succeeded[r.OrderID]++
		}
	}
	csrf, _ := c.Get(csrfContextKey).(string)
	v := pageView{Error: pageErrors[c.QueryParam("error")], CSRF: csrf, Specs: faultSpecs}
	for _, r := range rows {
		v.Charges = append(v.Charges, ledgerLine{Charge: r.view(), OrderID: r.OrderID, Double: succeeded[r.OrderID] > 1})
	}
	for order, n := range succeeded {
		if n > 1 {
			v.DoubleOrders = append(v.DoubleOrders, order)
		}
	}
	sort.Strings(v.DoubleOrders)
	var err error
	if v.Deliveries, err = g.deliveries(ctx, 100); err != nil {
		return err
	}
	if v.Faults, err = g.armedFaults(ctx); err != nil {
		return err
	}
	for number, b := range testCards {
		v.TestCards = append(v.TestCards, testCardView{Number: number, Behaviour: b})
	}
	sort.Slice(v.TestCards, func(i, j int) bool { return v.TestCards[i].Number < v.TestCards[j].Number })

	name := "page"
	if c.QueryParam("partial") == "live" {
		name = "live"
	}
	// Render into a buffer first, so a template error never leaves half a page.
	var buf bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&buf, name, v); err != nil {
		return fmt.Errorf("render page: %w", err)
	}
	return c.HTMLBlob(http.StatusOK, buf.Bytes())
}
