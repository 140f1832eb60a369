package handlers

import "github.com/labstack/echo/v4"

// KeyScope is the idempotency.Scope of the shop's routes: keys belong to the authenticated
// tenant (API) or the selected store (storefront), and within it to the API key or browser
// session that made the request (PrincipalOf).
func KeyScope(c echo.Context) (tenantID, principal string) {
	t := TenantOf(c)
	if t == nil {
		return "", ""
	}
	return t.ID, PrincipalOf(c)
}
