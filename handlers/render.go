package handlers

import (
	"bytes"
	"net/http"

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

// Response is an answer prepared before it is written, so that exactly these bytes can be both
// stored with an idempotency key and sent.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSONResponse encodes v the way writeJSON does.
func JSONResponse(status int, v any) (Response, error) {
	b, err := encodeJSON(v)
	if err != nil {
		return Response{}, err
	}
	return Response{Status: status, Header: http.Header{echo.HeaderContentType: {echo.MIMEApplicationJSON}}, Body: b}, nil
}

// Write sends r.
func (r Response) Write(c echo.Context) error {
	for name, values := range r.Header {
		for _, v := range values {
			c.Response().Header().Set(name, v)
		}
	}
	return c.Blob(r.Status, r.Header.Get(echo.HeaderContentType), r.Body)
}
