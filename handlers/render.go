package handlers

import (
	"bytes"
	"net/http"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"checkoutlab/models"
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

// jsonResponse prepares v as the answer writeJSON would send, so that exactly these bytes can
// be both stored with an idempotency key and sent.
func jsonResponse(status int, v any) (models.Response, error) {
	b, err := encodeJSON(v)
	if err != nil {
		return models.Response{}, err
	}
	return models.Response{Status: status, Header: http.Header{echo.HeaderContentType: {echo.MIMEApplicationJSON}}, Body: b}, nil
}

// writeResponse sends a prepared answer: its headers, status and body.
func writeResponse(c echo.Context, r models.Response) error {
	for name, values := range r.Header {
		c.Response().Header()[name] = values
	}
	return c.Blob(r.Status, r.Header.Get(echo.HeaderContentType), r.Body)
}
