package imds

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	awsimds "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/backoff"
	"github.com/termsig/termsig/internal/health"
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

// A watcher is one run of Watch: one poller per path, and their health,
// part i being pollers[i].
type watcher struct {
	cfg     Config // with defaults
	client  *awsimds.Client
	out     chan<- termsig.Notice
	pollers []poller
	parts   *health.Parts
}

func newWatcher(ctx context.Context, cfg Config, client *awsimds.Client, out chan<- termsig.Notice) *watcher {
	w := &watcher{cfg: cfg, client: client, out: out}
	w.pollers = w.newPollers()
	w.parts = health.New(ctx, len(w.pollers))
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

// run polls every path, each in its own goroutine so that a slow answer
// on one does not delay the others, until ctx is done.
func (w *watcher) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range w.pollers {
		wg.Go(func() { w.loop(ctx, i) })
	}
	wg.Wait()
}

// loop polls the path of pollers[i] until ctx is done. After each poll it
// records the path's health, hands the notices over and, after the first,
// records the path's first look: the Notifier is told that the source is
// ready once every path has had one.
func (w *watcher) loop(ctx context.Context, i int) {
	p := w.pollers[i]
	timer := time.NewTimer(0)
	defer timer.Stop()
	// After n failures in a row: interval·2^(n-1), up to the limit.
	bo := backoff.Backoff{Base: p.interval, Max: p.limit}
	for first := true; ; first = false {
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
		w.parts.Set(i, err)
		if !w.send(ctx, p.path, notices) {
			return
		}
		if first {
			w.parts.Looked(i)
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
		w.cfg.Logger.Debug("imds: notice", "path", path, "notice", n)
		select {
		case w.out <- n:
		case <-ctx.Done():
			return false
		}
	}
	return true
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
	ctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	defer cancel()
	res, err := w.client.GetMetadata(ctx, &awsimds.GetMetadataInput{Path: path})
	if err != nil {
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
			return false, nil, nil
		}
		return false, nil, &pathError{path: path, msg: describe(err, w.cfg.RequestTimeout), err: err}
	}
	defer res.Content.Close()
	body, err = io.ReadAll(io.LimitReader(res.Content, maxBody+1))
	if err != nil {
		return false, nil, &pathError{path: path, msg: "reading the answer: " + describe(err, w.cfg.RequestTimeout), err: err}
	}
	if len(body) > maxBody {
		return false, nil, &pathError{path: path, msg: path + ": answer larger than 1 MiB", err: errBadPayload}
	}
	return true, body, nil
}
