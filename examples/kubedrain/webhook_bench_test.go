package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/termsig/termsig/imds/imdstest"
)

// BenchmarkSpotToWebhook measures, against a real kube-apiserver, the
// time from a spot interruption posted in IMDS to a webhook receiver on
// loopback having the notice's POST and the "drained" one (two pods
// evicted), and kubedrain's own part: from the notice's Observed (the
// imds source saw it) to the notice's POST. Each iteration is one trial
// with a fresh kubedrain process; IMDS polled every 100 ms, so that
// the polling decides less of the figure than at the default 1 s:
//
//	go test -run '^$' -bench SpotToWebhook -benchtime 50x
func BenchmarkSpotToWebhook(b *testing.B) {
	c, kubeconfig := setupCluster(b)
	srv := imdstest.NewServer()
	defer srv.Close()
	type arrival struct {
		outcome  string
		observed time.Time
		at       time.Time
	}
	got := make(chan arrival, 16)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := arrival{at: time.Now()}
		var body struct {
			Outcome  string
			Observed time.Time
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err == nil {
			a.outcome, a.observed = body.Outcome, body.Observed
		}
		got <- a
	}))
	defer rcv.Close()
	const template = `{"outcome":{{json .Outcome}},"observed":{{json .Notice.Observed}}}`
	const interval = 100 * time.Millisecond
	var notice, drained, own []time.Duration
	for i := range b.N {
		id := fmt.Sprintf("hook-%d", i)
		label := func(p *corev1.Pod) { p.Labels = map[string]string{"trial": id} }
		for j := range 2 {
			createRunningPod(b, c.Client, newPod("work", fmt.Sprintf("p-%s-%d", id, j), ownedBy("ReplicaSet"), label))
		}
		kd := startKubedrain(b, kubeconfig, srv.URL, "--imds-interval", interval.String(), "--log-level", "info",
			"--webhook-url", rcv.URL, "--webhook-template", template)
		require.NoError(b, srv.AwaitRequests(b.Context(), imdstest.PathInstanceAction, srv.Requests(imdstest.PathInstanceAction)+1))
		// The interruption lands at any moment of the polling cycle: this
		// sleep sets the phase, it waits for nothing.
		time.Sleep(rand.N(interval))
		flip := time.Now()
		srv.SetInterruption("terminate", flip.Add(2*time.Minute))
		for done := false; !done; {
			var a arrival
			select {
			case a = <-got:
			case <-time.After(30 * time.Second):
				b.Fatal("the webhook got no POST")
			}
			switch a.outcome {
			case "":
				notice = append(notice, a.at.Sub(flip))
				own = append(own, a.at.Sub(a.observed))
			case "drained":
				drained = append(drained, a.at.Sub(flip))
				done = true
			default:
				b.Fatalf("unexpected outcome %q", a.outcome)
			}
		}
		kd.stop(b)
		srv.ClearInterruption()
		resetNode(b, c.Client, id)
	}
	b.StopTimer()
	report(b, "notice-posted", notice)
	report(b, "drained-posted", drained)
	report(b, "own", own)
}
