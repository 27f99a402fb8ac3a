package ops_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/ops"
	"github.com/termsig/termsig/internal/ops/opstest"
)

// Imminent notices are posted once per event (a held one once, however
// often its deadline moves, and again when it stops being held), advice
// only when asked, outcomes always, each with the program's fields and
// an outcome's own; the sends are counted.
func TestWebhookGetsImminentNoticesOnceAndOutcomes(t *testing.T) {
	bodies := make(chan string, 100)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- string(b)
	}))
	defer rcv.Close()
	s, err := ops.Start(ops.Config{Name: "kubedrain", MetricsAddr: "127.0.0.1:0", Webhook: ops.WebhookConfig{URL: rcv.URL, Headers: []string{"X-Token: t"}, Fields: map[string]string{"node": "n1"}}})
	require.NoError(t, err)
	held := termsig.Notice{Source: "asg", Kind: termsig.Terminate, Event: "asg/lifecycle", Held: true, Deadline: time.Now().Add(time.Hour)}
	s.Noticed(held)
	held.Deadline = held.Deadline.Add(time.Minute)
	s.Noticed(held) // the deadline moved: not posted again
	s.Noticed(termsig.Notice{Source: "imds", Kind: termsig.Rebalance, Event: "rebalance"})
	lapsed := held
	lapsed.Held = false
	s.Noticed(lapsed)
	s.Outcome(held, "drained", map[string]string{"pods_left": "0"})
	var got []string
	for range 3 {
		got = append(got, <-bodies)
	}
	// The sends are counted once each answer is read: scrape until they are.
	var mfs map[string]*dto.MetricFamily
	for {
		mfs = opstest.Scrape(t, s.MetricsAddr())
		if v, _ := opstest.Value(mfs, "termsig_webhook_sends_total", map[string]string{"result": "sent"}); v == 3 {
			break
		}
	}
	s.Close()
	close(bodies)
	for b := range bodies {
		got = append(got, b)
	}
	var texts []string
	for _, b := range got {
		var m struct{ Text string }
		require.NoError(t, json.Unmarshal([]byte(b), &m), b)
		texts = append(texts, m.Text)
	}
	require.Len(t, texts, 3, "%q", texts)
	assert.Contains(t, texts[0], "kubedrain: asg: terminate")
	assert.True(t, strings.HasSuffix(texts[0], " (node=n1)"), texts[0])
	assert.NotContains(t, texts[1], "held")
	assert.Contains(t, texts[2], "kubedrain: drained: asg: terminate")
	assert.True(t, strings.HasSuffix(texts[2], " (node=n1, pods_left=0)"), texts[2])
	sent, ok := opstest.Value(mfs, "termsig_webhook_sends_total", map[string]string{"result": "sent"})
	assert.True(t, ok)
	assert.Equal(t, 3.0, sent)
}

// Advice is posted when asked; a webhook that cannot work is an error of
// Start that names the flag.
func TestWebhookAdviceAndBadConfig(t *testing.T) {
	got := make(chan struct{}, 10)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- struct{}{} }))
	defer rcv.Close()
	s, err := ops.Start(ops.Config{Webhook: ops.WebhookConfig{URL: rcv.URL, Advice: true}})
	require.NoError(t, err)
	s.Noticed(termsig.Notice{Source: "imds", Kind: termsig.Rebalance, Event: "rebalance"})
	<-got
	s.Close()

	_, err = ops.Start(ops.Config{Webhook: ops.WebhookConfig{URL: "ftp://x"}})
	assert.ErrorContains(t, err, "--webhook-url")
	_, err = ops.Start(ops.Config{Webhook: ops.WebhookConfig{URL: rcv.URL, Template: "{{"}})
	assert.ErrorContains(t, err, "template")
}
