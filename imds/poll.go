package imds

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	awsimds "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/backoff"
)

// A poller is one path with what has been reported from it. Each runs in
// its own goroutine, so its state needs no lock.
type poller struct {
	path     string
	interval time.Duration
	limit    time.Duration // the longest backoff
	// handle turns one answer into notices. found is false for 404.
	handle func(found bool, body []byte) ([]termsig.Notice, error)
}

// A watcher is one run of Watch.
type watcher struct {
	cfg     *Config // with defaults
	client  *awsimds.Client
	out     chan<- termsig.Notice
	log     *slog.Logger
	pollers []poller
	health  *health
	unseen  atomic.Int32 // pollers that have not had their first look
}

func newWatcher(ctx context.Context, cfg *Config, client *awsimds.Client, out chan<- termsig.Notice) *watcher {
	w := &watcher{cfg: cfg, client: client, out: out, log: cfg.Logger}
	w.pollers = w.newPollers()
	w.health = &health{ctx: ctx, errs: map[string]error{}}
	for _, p := range w.pollers {
		w.health.paths = append(w.health.paths, p.path)
	}
	w.unseen.Store(int32(len(w.pollers)))
	return w
}

func (w *watcher) newPollers() []poller {
	var ps []poller
	urgent := min(w.cfg.MaxBackoff, 4*w.cfg.Interval)
	if w.cfg.Events&SpotInterruption != 0 {
		ps = append(ps, poller{PathInstanceAction, w.cfg.Interval, urgent, newSpotHandler()})
	}
	if w.cfg.Events&LifecycleState != 0 {
		ps = append(ps, poller{PathLifecycle, w.cfg.Interval, urgent, newLifecycleHandler()})
	}
	if w.cfg.Events&RebalanceRecommendation != 0 {
		ps = append(ps, poller{PathRebalance, w.cfg.AdvisoryInterval, w.cfg.MaxBackoff, newRebalanceHandler()})
	}
	if w.cfg.Events&ScheduledMaintenance != 0 {
		ps = append(ps, poller{PathScheduled, w.cfg.AdvisoryInterval, w.cfg.MaxBackoff, newScheduledHandler()})
	}
	return ps
}

// loop polls one path until ctx is done.
func (w *watcher) loop(ctx context.Context, p poller) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	// After n failures in a row: interval·2^(n-1), up to the limit.
	bo := backoff.Backoff{Base: p.interval, Max: p.limit}
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := time.Now()
		notices, err := w.poll(ctx, p)
		if ctx.Err() != nil {
			return // an error caused by Stop is no error
		}
		w.health.set(p.path, err)
		if !w.send(ctx, p.path, notices) {
			return
		}
		if first {
			first = false
			w.looked(ctx)
		}
		wait := p.interval
		if err != nil {
			wait = bo.Next()
		} else {
			bo.Reset()
		}
		timer.Reset(time.Until(start.Add(wait)))
	}
}

// send hands notices over, and reports false if ctx ended first.
func (w *watcher) send(ctx context.Context, path string, notices []termsig.Notice) bool {
	for _, n := range notices {
		w.log.Debug("imds: notice", "path", path, "notice", n)
		select {
		case w.out <- n:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// looked records that one poller has had its first look (an answer or an
// error, and its notices handed over), and tells the Notifier once every
// poller has.
func (w *watcher) looked(ctx context.Context) {
	if w.unseen.Add(-1) == 0 {
		termsig.Ready(ctx)
	}
}

// poll fetches p's path once and hands the answer to p.handle.
func (w *watcher) poll(ctx context.Context, p poller) ([]termsig.Notice, error) {
	found, body, err := w.get(ctx, p.path)
	if err != nil {
		return nil, err
	}
	notices, err := p.handle(found, body)
	if err != nil {
		return nil, &pathError{path: p.path, msg: p.path + ": " + err.Error(), err: err}
	}
	now := time.Now()
	for i := range notices {
		notices[i].Source = Name
		notices[i].Observed = now
	}
	return notices, nil
}

// maxBody bounds what is read of one answer: real ones are a few hundred
// bytes.
const maxBody = 1 << 20

func (w *watcher) get(ctx context.Context, path string) (found bool, body []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	res, err := w.client.GetMetadata(ctx, &awsimds.GetMetadataInput{Path: path})
	if err != nil {
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
			return false, nil, nil
		}
		return false, nil, &pathError{path: path, msg: describe(err, w.cfg.Timeout), err: err}
	}
	defer res.Content.Close()
	body, err = io.ReadAll(io.LimitReader(res.Content, maxBody+1))
	if err != nil {
		return false, nil, &pathError{path: path, msg: "reading the answer: " + describe(err, w.cfg.Timeout), err: err}
	}
	if len(body) > maxBody {
		return false, nil, &pathError{path: path, msg: path + ": answer larger than 1 MiB", err: errBadPayload}
	}
	return true, body, nil
}

// health gathers the last outcome of each path into the one error that
// the source reports with termsig.ReportError. It reports after every
// poll, so that Notifier.Status says when IMDS last answered; the Notifier
// logs only the changes.
type health struct {
	ctx   context.Context
	paths []string // in polling order; set before the pollers start

	mu   sync.Mutex
	errs map[string]error
}

// set records the outcome of a poll of path and reports the source's
// health: the error of the first failing path, in polling order, or nil.
func (h *health) set(path string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errs[path] = err
	var first error
	for _, p := range h.paths {
		if e := h.errs[p]; e != nil {
			first = e
			break
		}
	}
	// Under the lock, so that two pollers' reports reach the Notifier in
	// the order they were made.
	termsig.ReportError(h.ctx, first)
}
