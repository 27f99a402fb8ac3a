package ops

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/webhook"
)

// WebhookConfig says where a Server posts what the program sees and does
// (see package internal/webhook). Its zero value posts nothing.
type WebhookConfig struct {
	URL      string   // --webhook-url
	URLFile  string   // --webhook-url-file: a file holding the URL (a Secret)
	Template string   // --webhook-template: a text/template over a webhook.Event
	Headers  []string // --webhook-header "Name: value", repeatable
	Advice   bool     // --webhook-advice: advice and Cleared notices too, not only imminent ones

	// Fields, set by the program rather than a flag, go with every event
	// it posts, notices and outcomes (kubedrain: "node"); an outcome's own
	// fields win over them.
	Fields map[string]string
}

func (c *WebhookConfig) registerFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.URL, "webhook-url", "", "post each imminent notice, and the program's outcome, to this URL (a Slack-compatible message by default); empty: off")
	fs.StringVar(&c.URLFile, "webhook-url-file", "", "a `file` holding the webhook's URL, such as a mounted Secret")
	fs.StringVar(&c.Template, "webhook-template", "", `the webhook's body: a Go text/template over {{.Program}}, {{.Notice}}, {{.Outcome}}, {{.Fields}}, {{.Text}}, with a "json" func; empty: {"text": ...}`)
	fs.Func("webhook-header", `a header of the webhook's POSTs, "Name: value"; repeatable`, func(v string) error {
		if name, _, ok := strings.Cut(v, ":"); !ok || strings.TrimSpace(name) == "" {
			return fmt.Errorf("%q is not Name: value", v)
		}
		c.Headers = append(c.Headers, v)
		return nil
	})
	fs.BoolVar(&c.Advice, "webhook-advice", false, "post advice (rebalance, maintenance) and Cleared notices too")
}

// startWebhook makes the Server's webhook sender, if one is configured.
func (s *Server) startWebhook(name string, c WebhookConfig) error {
	if c.URL == "" && c.URLFile == "" {
		return nil
	}
	h := http.Header{}
	for _, kv := range c.Headers {
		k, v, _ := strings.Cut(kv, ":")
		h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	sends := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "termsig_webhook_sends_total",
		Help: "Events posted to the webhook, by result: sent, failed (given up), dropped (queue full, or at exit).",
	}, []string{"result"})
	for _, r := range []string{webhook.ResultSent, webhook.ResultFailed, webhook.ResultDropped} {
		sends.WithLabelValues(r)
	}
	hook, err := webhook.New(webhook.Config{URL: c.URL, URLFile: c.URLFile, Template: c.Template, Headers: h, Logger: s.log,
		OnResult: func(r string) { sends.WithLabelValues(r).Inc() }})
	if err != nil {
		return fmt.Errorf("--webhook-url: %w", err)
	}
	s.reg.MustRegister(sends)
	s.hook, s.hookName, s.hookAdvice, s.hookFields = hook, name, c.Advice, maps.Clone(c.Fields)
	s.hookSeen = map[[2]string]bool{}
	return nil
}

// post sends nt to the webhook, if there is one and it asks for nt: an
// imminent notice (a held one once, and again if it stops being held),
// advice and Cleared when asked.
func (s *Server) post(nt termsig.Notice) {
	if s.hook == nil || !nt.Kind.Imminent() && !s.hookAdvice {
		return
	}
	if nt.Held || nt.Kind.Imminent() {
		key := [2]string{nt.Source, nt.Event}
		s.hookMu.Lock()
		held, seen := s.hookSeen[key]
		s.hookSeen[key] = nt.Held
		s.hookMu.Unlock()
		if seen && held == nt.Held {
			return // the same hold, its deadline moved
		}
	}
	s.hook.Send(webhook.Event{Program: s.hookName, Notice: nt, Fields: s.hookFields})
}

// Outcome posts what the program did about nt ("drained", "job handed
// back") to the webhook, with fields for the template; nothing without a
// webhook.
func (s *Server) Outcome(nt termsig.Notice, outcome string, fields map[string]string) {
	if s == nil || s.hook == nil {
		return
	}
	all := maps.Clone(s.hookFields)
	if all == nil && len(fields) > 0 {
		all = map[string]string{}
	}
	maps.Copy(all, fields)
	s.hook.Send(webhook.Event{Program: s.hookName, Notice: nt, Outcome: outcome, Fields: all})
}

// closeWebhook posts what is queued, for at most a few seconds.
func (s *Server) closeWebhook() {
	if s.hook == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.hook.Close(ctx)
}
