package fakegateway

import (
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
)

func levelFor(status int) slog.Level {
	if status >= 500 {
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

func slogAttrs(c echo.Context, took time.Duration) []slog.Attr {
	return []slog.Attr{
		slog.String("method", c.Request().Method),
		slog.String("route", c.Path()),
		slog.Int("status", c.Response().Status),
		slog.Duration("took", took),
	}
}
