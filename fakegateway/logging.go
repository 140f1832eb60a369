package fakegateway

import (
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
)

// levelFor keeps the page's two-second refresh out of the default log while showing every
// call that changes something or fails.
func levelFor(method string, status int) slog.Level {
	switch {
	case status >= 500:
		return slog.LevelWarn
	case method == "GET" && status < 400:
		return slog.LevelDebug
	default:
		return slog.LevelInfo
	}
}

func slogAttrs(c echo.Context, took time.Duration) []slog.Attr {
	return []slog.Attr{
		slog.String("method", c.Request().Method),
		slog.String("route", c.Path()),
		slog.Int("status", c.Response().Status),
		slog.Duration("took", took),
	}
}
