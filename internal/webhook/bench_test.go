package webhook

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// BenchmarkSendToReceived measures Send → the endpoint has the POST, one
// event at a time, against a receiver on loopback: p50 and p99 are
// reported as metrics.
//
//	go test -run '^$' -bench SendToReceived -benchtime 1000x ./internal/webhook
func BenchmarkSendToReceived(b *testing.B) {
	got := make(chan time.Time, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- time.Now()
	}))
	defer srv.Close()
	s, err := New(Config{URL: srv.URL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		s.Send(Event{Program: "bench", Notice: spot})
		lat = append(lat, (<-got).Sub(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
