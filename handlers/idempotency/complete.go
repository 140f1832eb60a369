package idempotency

import (
	"errors"

	"github.com/labstack/echo/v4"
	"gorm.io/gorm"

	"checkoutlab/models"
)

// Claim writes the request's key now if it is fresh (models.IdempotencyKey.Claim), for a
// handler that acts outside the database — calls the gateway — before its transaction: its
// key must exist before the act, so that a duplicate request waits (409) instead of acting
// too. On a route without a key it does nothing. Return its error as it is: the middleware
// answers a lost race (models.ErrKeyTaken) by deciding again.
func Claim(c echo.Context) error {
	key := KeyOf(c)
	if key == nil {
		return nil
	}
	err := key.Claim(c.Request().Context())
	if err != nil && !errors.Is(err, models.ErrKeyTaken) {
		return models.ErrServiceUnavailable.Wrap(err) // nothing was done: a retry is safe
	}
	return err
}

// CompleteTx stores r as the answer of the request's key inside tx, the transaction of the
// business write, and links the order (if orderID is not empty): the business rows and the
// stored answer commit together or not at all. On a route without a key it does nothing. It
// returns models.ErrLeaseLost if another request took the key over: return it, so the
// transaction rolls back.
func CompleteTx(c echo.Context, tx *gorm.DB, r models.Response, orderID string) error {
	key := KeyOf(c)
	if key == nil {
		return nil
	}
	if orderID != "" {
		if err := key.LinkTx(tx, orderID, ""); err != nil {
			return err
		}
	}
	return key.CompleteTx(tx, r)
}
