package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// metricsServer serves redfence's OpenTelemetry metrics in Prometheus format
// on /metrics, through the OTel Prometheus exporter and a registry of its own.
type metricsServer struct {
	provider *sdkmetric.MeterProvider
	srv      *http.Server
	ln       net.Listener
	done     chan error
}

// startMetrics listens on addr ("host:port"; port 0 picks a free one) and
// serves /metrics until close.
func startMetrics(addr string) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &metricsServer{
		provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)),
		srv:      &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		ln:       ln,
		done:     make(chan error, 1),
	}
	go func() { m.done <- m.srv.Serve(ln) }()
	return m, nil
}

// addr returns the address the server listens on.
func (m *metricsServer) addr() string { return m.ln.Addr().String() }

// close stops the server and the meter provider, and joins the serving
// goroutine.
func (m *metricsServer) close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	if sErr := <-m.done; !errors.Is(sErr, http.ErrServerClosed) {
		err = errors.Join(err, sErr)
	}
	return errors.Join(err, m.provider.Shutdown(ctx))
}

// fprintMetricsURL tells the user where to scrape.
func fprintMetricsURL(w io.Writer, m *metricsServer) {
	fmt.Fprintf(w, "metrics: http://%s/metrics (Prometheus format)\n", m.addr())
}
