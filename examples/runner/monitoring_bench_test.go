//go:build linux

package main

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/ops"
	"github.com/termsig/termsig/termsigtest"
)

// BenchmarkNoticeToWebhook measures, with the runner's loop in this
// process and a job running, the time from a spot interruption sent by
// a termsigtest.Fake source to a webhook receiver on loopback having the
// notice's POST, the "job handed back" and the "unregistered" ones. The
// CI service is a fakeService in memory, so that the figures are the
// runner's and the webhook's own. Each iteration is a fresh runner, ops
// server and job. Run with -benchtime 200x.
func BenchmarkNoticeToWebhook(b *testing.B) {
	type arrival struct {
		text string
		at   time.Time
	}
	got := make(chan arrival, 16)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		var body struct{ Text string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		got <- arrival{body.Text, at}
	}))
	defer rcv.Close()
	var notice, handedBack, unregistered []time.Duration
	for range b.N {
		srv, err := startOps(ops.Config{Webhook: ops.WebhookConfig{URL: rcv.URL}}, "bench-runner", nil)
		if err != nil {
			b.Fatal(err)
		}
		path, _ := gate(b)
		svc := &fakeService{onClaim: func() *Job { return &Job{ID: "j-1", Command: "read line < " + path} }}
		spot := termsigtest.NewFake("imds")
		run := runHeldWith(b, svc, config{grace: time.Second, margin: time.Second, maxHold: time.Hour}, srv, spot)
		run.out.wait(b, `job j-1 started`)
		sentAt := time.Now()
		sent(b, spot.Send(termsig.Notice{Kind: termsig.Terminate, Event: "spot/instance-action", Deadline: sentAt.Add(time.Minute)}))
		for range 3 {
			var a arrival
			select {
			case a = <-got:
			case <-time.After(holdTestWait):
				b.Fatal("the webhook got no more POSTs")
			}
			switch d := a.at.Sub(sentAt); {
			case strings.HasPrefix(a.text, "runner: imds: terminate"):
				notice = append(notice, d)
			case strings.HasPrefix(a.text, "runner: "+outcomeHandedBack+": "):
				handedBack = append(handedBack, d)
			case strings.HasPrefix(a.text, "runner: "+outcomeUnregistered+": "):
				unregistered = append(unregistered, d)
			default:
				b.Fatalf("unexpected POST %q", a.text)
			}
		}
		if code := run.exit(b); code != exitClean {
			b.Fatalf("exit %d", code)
		}
		srv.Close()
	}
	b.StopTimer()
	reportQuantiles(b, "notice→posted", notice)
	reportQuantiles(b, "notice→handed-back-posted", handedBack)
	reportQuantiles(b, "notice→unregistered-posted", unregistered)
}

// reportQuantiles reports the p50 and p99 of d (by nearest rank) in
// milliseconds.
func reportQuantiles(b *testing.B, name string, d []time.Duration) {
	slices.Sort(d)
	rank := func(q float64) time.Duration { return d[max(int(math.Ceil(q*float64(len(d))))-1, 0)] }
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(rank(0.5)), name+"-p50-ms")
	b.ReportMetric(ms(rank(0.99)), name+"-p99-ms")
}
