package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
	"checkoutlab/web/components"
	"checkoutlab/web/pages"
)

// lowStock is the stock level below which a product shows "only N left".
const lowStock = 10

// home renders the default tenant's catalogue at "/".
func (s *Storefront) home(c echo.Context) error {
	t, err := s.Tenants.Get(c.Request().Context(), s.defaultTenant())
	if err != nil {
		return err
	}
	c.Set(ctxTenant, t)
	return s.catalogue(c)
}

// catalogue renders the tenant's product grid.
func (s *Storefront) catalogue(c echo.Context) error {
	t := TenantOf(c)
	products, err := s.Products.List(c.Request().Context(), t.ID)
	if err != nil {
		return err
	}
	lay, err := s.layoutFor(c, t, t.Name, -1)
	if err != nil {
		return err
	}
	vm := pages.CataloguePage{Layout: lay, CSRF: CSRFToken(c), Heading: t.Name}
	for _, p := range products {
		vm.Products = append(vm.Products, productCard(c, t.ID, p))
	}
	return render(c, http.StatusOK, pages.Catalogue(vm))
}

// product renders one product page; an unknown SKU is a 404 page.
func (s *Storefront) product(c echo.Context) error {
	t := TenantOf(c)
	p, err := s.Products.BySKU(c.Request().Context(), t.ID, c.Param("sku"))
	if err != nil {
		return err
	}
	lay, err := s.layoutFor(c, t, p.Name, -1)
	if err != nil {
		return err
	}
	vm := pages.ProductPage{Layout: lay, CSRF: CSRFToken(c), Product: productCard(c, t.ID, *p), BackURL: lay.StorePath}
	return render(c, http.StatusOK, pages.Product(vm))
}

func productCard(c echo.Context, tenantID string, p models.Product) pages.ProductCard {
	return pages.ProductCard{
		SKU: p.SKU, Name: p.Name, Description: p.Description, Image: p.Image,
		Price:   components.Money(p.Amount, p.Currency),
		URL:     pathFor(c, routeProduct, tenantID, p.SKU),
		AddURL:  pathFor(c, routeCartAdd, tenantID),
		InStock: p.Stock > 0, LowStock: p.Stock > 0 && p.Stock < lowStock, Stock: p.Stock,
	}
}
