package fakegateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

const maxBodyBytes = 64 << 10

// readJSON decodes the request body into v, strictly: unknown fields, trailing data, wrong
// types and bodies over 64 KiB are a 400. The whole body is read before decoding, which also
// lets net/http notice at once when a client hangs up while a fault keeps us waiting.
func readJSON(c echo.Context, v any) error {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, maxBodyBytes+1))
	if err != nil {
		return invalid("could not read the request body")
	}
	if len(body) > maxBodyBytes {
		return invalid("request body is larger than %d bytes", maxBodyBytes)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return invalid("request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("malformed JSON body: %s", jsonProblem(err))
	}
	if dec.More() {
		return invalid("malformed JSON body: trailing data after the object")
	}
	return nil
}

// jsonProblem describes a decoding error without echoing the offending value, which could be
// a card number.
func jsonProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return fmt.Sprintf("field %q must be of type %s", typeErr.Field, typeErr.Type)
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("syntax error at byte %d", syntaxErr.Offset)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return strings.TrimPrefix(err.Error(), "json: ")
	default:
		return "not a JSON object"
	}
}

// dropConnection hijacks the connection and closes it without writing a byte: the client's
// request reached us, but its answer is lost. Linger 0 makes the close a TCP reset, the way a
// crashed proxy or a middlebox loses a response.
func dropConnection(c echo.Context) error {
	conn, _, err := http.NewResponseController(c.Response()).Hijack()
	if err != nil {
		return fmt.Errorf("hijack connection: %w", err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	return conn.Close()
}
