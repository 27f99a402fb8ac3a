package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	awsimds "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
)

// interrupted is what an IMDS client reports when it sees a spot
// interruption.
const interrupted = "interrupted"

// An imdsClient is one of the IMDS pollers under test.
type imdsClient struct {
	name   string        // as in the table
	period time.Duration // its polling cycle, over which the interruptions are spread
	advice bool          // a rebalance recommendation is posted before it starts: termsig's fast mode
	start  func(url string) *watch
}

// imdsClients returns the IMDS pollers under test: termsig at its defaults
// first, the baseline of the ratios.
func imdsClients(o options) []imdsClient {
	sdk := func(period time.Duration) func(string) *watch {
		return func(url string) *watch { return sdkPoller(url, period) }
	}
	return []imdsClient{
		{name: "termsig imds, defaults (spot every 1 s)", period: imds.DefaultInterval, start: termsigIMDS},
		{name: "termsig imds, fast mode (rebalance recommendation posted: spot every 250 ms)",
			period: 250 * time.Millisecond, advice: true, start: termsigIMDS},
		{name: fmt.Sprintf("AWS SDK imds, fixed %v poller (reference handler)", o.handler), period: o.handler, start: sdk(o.handler)},
		{name: fmt.Sprintf("AWS SDK imds, fixed %v poller (AWS's advice)", o.advised), period: o.advised, start: sdk(o.advised)},
	}
}

// termsigIMDS runs termsig's imds source at its defaults against the IMDS
// at url, and reports each Terminate notice.
func termsigIMDS(url string) *watch {
	n := termsig.Config{Logger: discard}.New(imds.New(imds.Config{Endpoint: url, Logger: discard}))
	return notifierWatch(n, func(nt termsig.Notice) (string, bool) {
		return interrupted, nt.Kind == termsig.Terminate
	})
}

// sdkPoller polls spot/instance-action at url every period with the AWS
// SDK's imds client, as a fixed-interval monitor does, and reports the
// first 200 after a 404.
func sdkPoller(url string, period time.Duration) *watch {
	client := awsimds.New(awsimds.Options{Endpoint: url})
	ctx, cancel := context.WithCancel(context.Background())
	w := newWatch(cancel)
	w.wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		seen := false
		for {
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			out, err := client.GetMetadata(ctx, &awsimds.GetMetadataInput{Path: imdstest.PathInstanceAction})
			var re *smithyhttp.ResponseError
			switch {
			case err == nil:
				_, _ = io.Copy(io.Discard, out.Content) // the notice, which a handler would parse
				out.Content.Close()
				if !seen {
					w.report(interrupted)
				}
				seen = true
			case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound:
				seen = false
			}
		}
	})
	return w
}

// imdsLane runs trials of c, spread over workers that each have a fake
// IMDS and a client of their own, as many as it takes to finish in about
// lane, and returns the latencies. Trial k of them flips at phase
// (k+0.5)/trials of the client's cycle; worker w runs trials w, w+workers,
// and so on.
func imdsLane(ctx context.Context, c imdsClient, trials int, lane time.Duration) ([]time.Duration, error) {
	// A trial takes about three cycles (see imdsTrial).
	workers := int((time.Duration(trials)*3*c.period + lane - 1) / lane)
	workers = min(max(workers, 1), trials)
	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs []error
		wg   sync.WaitGroup
	)
	for w := range workers {
		var phases []float64
		for k := w; k < trials; k += workers {
			phases = append(phases, (float64(k)+0.5)/float64(trials))
		}
		wg.Go(func() {
			d, err := imdsWorker(ctx, c, phases)
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, d...)
			errs = append(errs, err)
		})
	}
	wg.Wait()
	return lat, errors.Join(errs...)
}

// imdsWorker runs a trial of c at each phase, with a fake and a client of
// its own.
func imdsWorker(ctx context.Context, c imdsClient, phases []float64) ([]time.Duration, error) {
	srv := imdstest.NewServer()
	defer srv.Close()
	if c.advice {
		srv.SetRebalance(time.Now())
	}
	w := c.start(srv.URL)
	defer w.stop()
	var lat []time.Duration
	for _, p := range phases {
		d, err := imdsTrial(ctx, srv, w, c.period, p)
		if err != nil {
			return lat, fmt.Errorf("%s: %w", c.name, err)
		}
		lat = append(lat, d)
	}
	return lat, nil
}

// imdsTrial posts a spot interruption at phase (0 to 1) of the client's
// polling cycle, returns how long the client took to see it, and clears
// it. It waits for two polls first, so that the client has seen the
// interruption gone (a poll in flight when it was cleared may have seen
// it), and flips phase × period after the second.
func imdsTrial(ctx context.Context, srv *imdstest.Server, w *watch, period time.Duration, phase float64) (time.Duration, error) {
	if err := polled(ctx, srv, 2, 3*period+10*time.Second); err != nil {
		return 0, err
	}
	if err := pause(ctx, time.Duration(phase*float64(period))); err != nil {
		return 0, err
	}
	w.drain()
	flip := time.Now()
	srv.SetInterruption("terminate", flip.Add(2*time.Minute))
	at, err := w.next(ctx, interrupted, 2*period+10*time.Second)
	srv.ClearInterruption()
	return at.Sub(flip), err
}

// polled waits up to timeout until srv has answered k more requests for
// spot/instance-action.
func polled(ctx context.Context, srv *imdstest.Server, k int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("spot/instance-action not polled %d times within %v", k, timeout))
	defer cancel()
	return srv.AwaitRequests(ctx, imdstest.PathInstanceAction, srv.Requests(imdstest.PathInstanceAction)+k)
}
