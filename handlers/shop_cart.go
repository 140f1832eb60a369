package handlers

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
	"checkoutlab/web/components"
	"checkoutlab/web/pages"
)

// cart renders the session's cart.
func (s *Storefront) cart(c echo.Context) error {
	vm, err := s.cartPage(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, pages.Cart(vm))
}

// addItem adds quantity units of sku to the cart. Errors: 400 for a quantity outside 1–99,
// 404 for an unknown product, 409 when stock runs out; the cart is unchanged in each case.
func (s *Storefront) addItem(c echo.Context) error {
	t := TenantOf(c)
	q, err := formQuantity(c)
	if err != nil {
		return err
	}
	sku := strings.TrimSpace(c.FormValue("sku"))
	if err := s.Carts.Add(c.Request().Context(), t.ID, SessionOf(c), sku, q); err != nil {
		return err
	}
	if isHTMX(c) {
		cart, err := s.Carts.Current(c.Request().Context(), t.ID, SessionOf(c))
		if err != nil {
			return err
		}
		name := sku
		for _, l := range cart.Lines {
			if l.Product.SKU == sku {
				name = l.Product.Name
			}
		}
		msg := fmt.Sprintf("Added %s to your cart.", name)
		return render(c, http.StatusOK, pages.AddedToCart(pathFor(c, routeCatalogue, t.ID), cart.ItemCount(), msg))
	}
	return c.Redirect(http.StatusSeeOther, withNotice(pathFor(c, routeCart, t.ID), "added"))
}

// setQuantity sets the quantity of a product in the cart; 0 removes it. Errors as addItem,
// plus 404 not_in_cart.
func (s *Storefront) setQuantity(c echo.Context) error {
	t := TenantOf(c)
	q, err := formQuantity(c)
	if err != nil {
		return err
	}
	if err := s.Carts.SetQuantity(c.Request().Context(), t.ID, SessionOf(c), c.Param("sku"), q); err != nil {
		return err
	}
	return s.afterCartChange(c, "updated")
}

// removeItem takes a product out of the cart.
func (s *Storefront) removeItem(c echo.Context) error {
	t := TenantOf(c)
	if err := s.Carts.Remove(c.Request().Context(), t.ID, SessionOf(c), c.Param("sku")); err != nil {
		return err
	}
	return s.afterCartChange(c, "removed")
}

// afterCartChange answers a cart POST: the new cart section for htmx, a 303 to the cart page
// otherwise.
func (s *Storefront) afterCartChange(c echo.Context, notice string) error {
	if !isHTMX(c) {
		return c.Redirect(http.StatusSeeOther, withNotice(pathFor(c, routeCart, TenantOf(c).ID), notice))
	}
	vm, err := s.cartPage(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, pages.CartUpdated(vm))
}

func (s *Storefront) cartPage(c echo.Context) (pages.CartPage, error) {
	t := TenantOf(c)
	cart, err := s.Carts.Current(c.Request().Context(), t.ID, SessionOf(c))
	if err != nil {
		return pages.CartPage{}, err
	}
	lay, err := s.layoutFor(c, t, "Your cart", cart.ItemCount())
	if err != nil {
		return pages.CartPage{}, err
	}
	total, currency := cart.Total()
	vm := pages.CartPage{
		Layout: lay, CSRF: CSRFToken(c), ItemCount: cart.ItemCount(),
		Subtotal:    components.Money(total, currency),
		CheckoutURL: pathFor(c, routeCheckout, t.ID), ShopURL: lay.StorePath, MaxQuantity: models.MaxLineQuantity,
	}
	for _, l := range cart.Lines {
		vm.Lines = append(vm.Lines, pages.CartLine{
			SKU: l.Product.SKU, Name: l.Product.Name, Image: l.Product.Image,
			URL: pathFor(c, routeProduct, t.ID, l.Product.SKU), Quantity: l.Quantity,
			UnitPrice: components.Money(l.Product.Amount, l.Product.Currency),
			LineTotal: components.Money(l.Amount(), l.Product.Currency),
			UpdateURL: pathFor(c, routeCartSet, t.ID, l.Product.SKU),
			DeleteURL: pathFor(c, routeCartDelete, t.ID, l.Product.SKU),
		})
	}
	return vm, nil
}

// formQuantity reads the "quantity" field; a missing or non-numeric value is a 400. The range
// is the store's to check, so the rule lives in one place.
func formQuantity(c echo.Context) (int, error) {
	raw := strings.TrimSpace(c.FormValue("quantity"))
	q, err := strconv.Atoi(raw)
	if err != nil {
		return 0, models.Invalid("Quantity must be a whole number.", map[string]string{"quantity": "must be a whole number"})
	}
	return q, nil
}
