package fakegateway

import (
	"context"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
)

// PaymentMethodRequest is the body of POST /v1/payment_methods.
type PaymentMethodRequest struct {
	CardNumber string `json:"card_number"`
}

// createPaymentMethod handles POST /v1/payment_methods: it exchanges a card number for a
// pm_ id that carries the card's last four digits, brand and test behaviour. A number that is
// not 12 to 19 digits or fails the Luhn check is a 400 invalid_card_number.
func (g *Gateway) createPaymentMethod(c echo.Context) error {
	var req PaymentMethodRequest
	if err := readJSON(c, &req); err != nil {
		return err
	}
	cd, err := parseCard(req.CardNumber)
	if err != nil {
		return err
	}
	ctx := context.WithoutCancel(c.Request().Context())
	pm := paymentMethodRow{ID: newID("pm"), Last4: cd.last4, Brand: cd.brand, Behaviour: cd.behaviour, CreatedAt: g.now()}
	if err := g.db.WithContext(ctx).Create(&pm).Error; err != nil {
		return fmt.Errorf("create payment method: %w", err)
	}
	g.log.InfoContext(ctx, "payment method created", "payment_method", pm.ID, "last4", pm.Last4, "brand", pm.Brand)
	return c.JSON(http.StatusCreated, pm.view())
}
