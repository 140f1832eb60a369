package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"checkoutlab/telemetry"
)

// keepGlobals puts the global TracerProvider and propagator back when the test ends: Setup
// replaces them for the whole process.
func keepGlobals(t *testing.T) {
	provider, propagator := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() {
		otel.SetTracerProvider(provider)
		otel.SetTextMapPropagator(propagator)
	})
}

// Off, Setup leaves the TracerProvider as it found it — no exporter, no SDK — and still
// installs the W3C propagator, so a traceparent that arrives is passed on.
func TestSetupWithoutEndpointInstallsNoExporter(t *testing.T) {
	keepGlobals(t)
	t.Setenv(telemetry.EndpointVar, "")
	before := otel.GetTracerProvider()
	shutdown, err := telemetry.Setup(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if got := otel.GetTracerProvider(); got != before {
		t.Errorf("TracerProvider: got %T, want the one installed before (%T) left alone", got, before)
	}
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
		t.Errorf("an SDK TracerProvider is installed with %s unset", telemetry.EndpointVar)
	}
	fields := otel.GetTextMapPropagator().Fields()
	for _, want := range []string{"traceparent", "baggage"} {
		if !slices.Contains(fields, want) {
			t.Errorf("propagator fields %v, want %s among them", fields, want)
		}
	}
	// A span made now is the no-op's: not recording, nothing to export.
	_, span := otel.Tracer("test").Start(context.Background(), "nothing")
	if span.IsRecording() {
		t.Error("a span records with tracing off")
	}
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// On, a span ends up at the collector as an OTLP/HTTP export to /v1/traces.
func TestSetupExportsOverOTLPHTTP(t *testing.T) {
	keepGlobals(t)
	received := make(chan *collectortrace.ExportTraceServiceRequest, 10)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("collector got %s %s (%s), want POST /v1/traces in protobuf", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("collector: unreadable export: %v", err)
		}
		received <- &req
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer collector.Close()
	t.Setenv(telemetry.EndpointVar, collector.URL)

	ctx := context.Background()
	shutdown, err := telemetry.Setup(ctx, "shop-under-test")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); !ok {
		t.Fatalf("TracerProvider: got %T, want the SDK's", otel.GetTracerProvider())
	}
	_, span := otel.Tracer("test").Start(ctx, "POST /api/v1/checkout")
	traceID := span.SpanContext().TraceID()
	span.End()
	// Shutdown flushes the batch: the export happens before it returns.
	stop, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := shutdown(stop); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	select {
	case req := <-received:
		var names []string
		service := ""
		for _, rs := range req.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					service = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names = append(names, s.Name)
					if [16]byte(s.TraceId) != traceID {
						t.Errorf("span %s has trace id %x, want %s", s.Name, s.TraceId, traceID)
					}
				}
			}
		}
		if !slices.Contains(names, "POST /api/v1/checkout") {
			t.Errorf("exported spans %v, want POST /api/v1/checkout", names)
		}
		if service != "shop-under-test" {
			t.Errorf("service.name %q, want shop-under-test", service)
		}
	default:
		t.Fatal("the collector received nothing")
	}
}

// The propagator Setup installs reads and writes the W3C header.
func TestSetupPropagatesTraceparent(t *testing.T) {
	keepGlobals(t)
	t.Setenv(telemetry.EndpointVar, "")
	if _, err := telemetry.Setup(context.Background(), "shop"); err != nil {
		t.Fatal(err)
	}
	in := propagation.MapCarrier{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	ctx := otel.GetTextMapPropagator().Extract(context.Background(), in)
	out := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, out)
	if out["traceparent"] != in["traceparent"] {
		t.Errorf("traceparent passed on: got %q, want %q", out["traceparent"], in["traceparent"])
	}
}
