package handlers

import (
	"bytes"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
)

// render writes a templ component through a buffer, so a template error never leaves half a
// page on the wire: the error reaches the error handler while nothing has been sent yet.
func render(c echo.Context, status int, component templ.Component) error {
	var buf bytes.Buffer
	if err := component.Render(c.Request().Context(), &buf); err != nil {
		return err
	}
	return c.HTMLBlob(status, buf.Bytes())
}
