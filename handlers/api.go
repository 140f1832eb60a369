package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
)

// ProductLister is what the API needs from the product store.
type ProductLister interface {
	List(ctx context.Context, tenantID string) ([]models.Product, error)
}

// CatalogAPI serves the tenant's catalogue to API clients.
type CatalogAPI struct {
	Products ProductLister
}

// Routes mounts the catalogue endpoints on an authenticated /api/v1 group.
func (h *CatalogAPI) Routes(g *echo.Group) {
	g.GET("/products", h.list).Name = "api.products"
}

// ProductJSON is a product as the API shows it.
type ProductJSON struct {
	SKU         string `json:"sku"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Stock       int    `json:"stock"`
}

func (h *CatalogAPI) list(c echo.Context) error {
	ps, err := h.Products.List(c.Request().Context(), TenantOf(c).ID)
	if err != nil {
		return err
	}
	out := make([]ProductJSON, len(ps))
	for i, p := range ps {
		out[i] = ProductJSON{SKU: p.SKU, Name: p.Name, Description: p.Description, Amount: p.Amount, Currency: p.Currency, Stock: p.Stock}
	}
	return writeJSON(c, http.StatusOK, map[string]any{"products": out})
}
