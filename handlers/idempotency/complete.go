package idempotency

import (
	"github.com/labstack/echo/v4"
	"gorm.io/gorm"

	"checkoutlab/models"
)

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
