package idempotency

import (
	"bytes"
	"net/http"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
)

// recording holds back what the handler writes — status, headers and body — so the middleware
// can decide (store, forget, release) before anything reaches the client, and then write
// exactly the bytes it stored. The handler's headers go to a map of their own: of them, only
// the StoredHeaders are ever sent, on the first answer as on every replay.
type recording struct {
	res    *echo.Response
	orig   http.ResponseWriter
	header http.Header
	status int
	buf    bytes.Buffer
}

func startRecording(res *echo.Response) *recording {
	r := &recording{res: res, orig: res.Writer, header: http.Header{}}
	res.Writer = r
	return r
}

func (r *recording) Header() http.Header         { return r.header }
func (r *recording) WriteHeader(status int)      { r.status = status }
func (r *recording) Write(b []byte) (int, error) { return r.buf.Write(b) }

// stop puts the real writer back as if nothing had been written yet, and returns what was
// recorded: the status, the stored headers and the body.
func (r *recording) stop() *models.Response {
	r.res.Writer = r.orig
	r.res.Committed = false
	r.res.Status = http.StatusOK
	r.res.Size = 0
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	header := http.Header{}
	for _, name := range models.StoredHeaders {
		if v := r.header.Get(name); v != "" {
			header.Set(name, v)
		}
	}
	return &models.Response{Status: status, Header: header, Body: r.buf.Bytes()}
}
