package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Ops serves the operational endpoints: health and metrics.
type Ops struct {
	// Ping checks the database.
	Ping     func(ctx context.Context) error
	Registry *prometheus.Registry
}

// Routes mounts /healthz and /metrics.
func (h *Ops) Routes(e *echo.Echo) {
	e.GET("/healthz", h.health).Name = "healthz"
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(h.Registry, promhttp.HandlerOpts{}))).Name = "metrics"
}

func (h *Ops) health(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := h.Ping(ctx); err != nil {
		return writeJSON(c, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "database": "unreachable"})
	}
	return writeJSON(c, http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
}

// NewRegistry returns a Prometheus registry with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// MetricsMiddleware counts requests by route, method and status, and times them.
func MetricsMiddleware(reg prometheus.Registerer) echo.MiddlewareFunc {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "checkoutlab_http_requests_total", Help: "HTTP requests by route, method (other for a method HTTP does not define) and status.",
	}, []string{"route", "method", "status"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "checkoutlab_http_request_duration_seconds", Help: "HTTP request latency by route.",
		Buckets: prometheus.DefBuckets,
	}, []string{"route"})
	reg.MustRegister(requests, duration)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			status := c.Response().Status
			if err != nil {
				status = StatusOf(err)
			}
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			requests.WithLabelValues(route, methodLabel(c.Request().Method), strconv.Itoa(status)).Inc()
			duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
			return err
		}
	}
}
