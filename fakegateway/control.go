package fakegateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
)

// Ledger is the body of GET /_control/ledger: every charge, oldest first.
type Ledger struct {
	Charges []Charge `json:"charges"`
}

// FaultList is the body of GET /_control/faults: the faults that can still strike.
type FaultList struct {
	Faults []Fault `json:"faults"`
}

// DeliveryList is the body of GET /_control/deliveries: the newest deliveries first.
type DeliveryList struct {
	Deliveries []Delivery `json:"deliveries"`
}

func (g *Gateway) ledger(c echo.Context) error {
	var rows []chargeRow
	if err := g.db.WithContext(c.Request().Context()).Order("created_at, id").Find(&rows).Error; err != nil {
		return fmt.Errorf("load ledger: %w", err)
	}
	return c.JSON(http.StatusOK, Ledger{Charges: views(rows)})
}

func (g *Gateway) listFaults(c echo.Context) error {
	faults, err := g.armedFaults(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, FaultList{Faults: faults})
}

// postFault arms a fault from a JSON body (the API) or a form (the page, which then gets a
// 303 back to itself).
func (g *Gateway) postFault(c echo.Context) error {
	fromForm := isForm(c)
	var req FaultRequest
	var err error
	if fromForm {
		req, err = faultRequestFromForm(c)
	} else {
		err = readJSON(c, &req)
	}
	var f Fault
	if err == nil {
		f, err = g.armFault(c.Request().Context(), req)
	}
	if fromForm {
		if err == nil {
			// The page confirms what was armed, looked up by id: no text travels in the URL.
			return c.Redirect(http.StatusSeeOther, "/?armed="+strconv.FormatInt(f.ID, 10))
		}
		return g.redirectHome(c, err)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, f)
}

func (g *Gateway) deleteFaults(c echo.Context) error {
	err := g.disarmAll(c.Request().Context())
	if isForm(c) {
		if err == nil {
			return c.Redirect(http.StatusSeeOther, "/?disarmed=all")
		}
		return g.redirectHome(c, err)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, FaultList{Faults: []Fault{}})
}

func (g *Gateway) listDeliveries(c echo.Context) error {
	ds, err := g.deliveries(c.Request().Context(), 200)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, DeliveryList{Deliveries: ds})
}

// postResend handles POST /_control/events/:id/resend: 202 with the queued delivery.
func (g *Gateway) postResend(c echo.Context) error {
	d, err := g.resendEvent(c.Request().Context(), c.Param("id"))
	if isForm(c) {
		return g.redirectHome(c, err)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, d)
}

// isForm reports whether the request is the page's HTML form. A JSON body counts as JSON
// whatever its Content-Type says: `curl -d '{"fault":…}'` sends the form type by default, and
// must arm the fault rather than be read as an empty form. The answer is kept in the context:
// once the form is parsed (for its CSRF token) the body is gone and cannot be looked at again.
func isForm(c echo.Context) bool {
	if known, ok := c.Get(isFormKey).(bool); ok {
		return known
	}
	form := func() bool {
		if !strings.HasPrefix(c.Request().Header.Get(echo.HeaderContentType), echo.MIMEApplicationForm) {
			return false
		}
		// A peek at the start is enough; the rest stays in the body for whoever reads it.
		r := c.Request()
		start, err := io.ReadAll(io.LimitReader(r.Body, 512))
		if err != nil {
			return true
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(start), r.Body), r.Body}
		return !strings.HasPrefix(strings.TrimSpace(string(start)), "{")
	}()
	c.Set(isFormKey, form)
	return form
}

const isFormKey = "fakegateway.is_form"

// redirectHome answers a form post with a 303 to the page. A failure travels as a code
// (/?error=invalid_request), never as text: the page shows a fixed message per code, so a
// link to the page cannot make it say anything else. The detailed message goes to the log.
func (g *Gateway) redirectHome(c echo.Context, err error) error {
	if err == nil {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	code := "internal_error"
	var ae *apiError
	if errors.As(err, &ae) && pageErrors[ae.Code] != "" {
		code = ae.Code
		g.log.InfoContext(c.Request().Context(), "form action refused", "path", c.Path(), "code", ae.Code, "message", ae.Message)
	} else {
		g.log.ErrorContext(c.Request().Context(), "form action failed", "path", c.Path(), "err", err)
	}
	return c.Redirect(http.StatusSeeOther, "/?error="+code)
}

// pageErrors are the messages the page can show, keyed by the code in /?error=.
var pageErrors = map[string]string{
	"invalid_request":  "The fault was not armed: a value is not a number, is out of range, or does not apply to this fault (docs/failure-modes.md lists each fault's parameters). The gateway's log says which.",
	"unknown_fault":    "The fault was not armed: the gateway has no fault of that name.",
	"resource_missing": "Nothing was resent: the gateway has no such event.",
	"internal_error":   "The gateway failed unexpectedly; its log says why.",
}

// faultRequestFromForm reads the fault form of the page. Empty fields are absent.
func faultRequestFromForm(c echo.Context) (FaultRequest, error) {
	req := FaultRequest{Fault: c.FormValue("fault")}
	ints := map[string]**int{"times": &req.Times, "delay_ms": &req.DelayMS, "status": &req.Status, "copies": &req.Copies}
	for name, dst := range ints {
		if s := strings.TrimSpace(c.FormValue(name)); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				return req, invalid("%s must be a whole number", name)
			}
			*dst = &n
		}
	}
	if s := strings.TrimSpace(c.FormValue("probability")); s != "" {
		p, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return req, invalid("probability must be a number")
		}
		req.Probability = &p
	}
	if s := strings.TrimSpace(c.FormValue("seed")); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return req, invalid("seed must be a whole number")
		}
		req.Seed = &n
	}
	if s := strings.TrimSpace(c.FormValue("code")); s != "" {
		req.Code = &s
	}
	return req, nil
}
