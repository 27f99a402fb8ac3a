package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"cloud.google.com/go/compute/metadata"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/gcemeta"
	"github.com/termsig/termsig/gcemeta/gcemetatest"
	"github.com/termsig/termsig/termsigtest"
)

// The key that the GCE rows change, and its two values.
const (
	gceKey   = gcemetatest.MaintenanceEvent
	migrate  = "MIGRATE_ON_HOST_MAINTENANCE"
	noEvent  = "NONE"
	gceQuiet = 250 * time.Millisecond // between trials: see gceRig.change
)

// gceWait bounds the wait for a client to see a change, which takes a
// millisecond.
const gceWait = 10 * time.Second

// gceNames are the names of the GCE clients in the table, in the order of
// gceResult's slices.
var gceNames = [2]string{"termsig gcemeta, defaults", "compute/metadata Client.SubscribeWithContext"}

// termsigGCE runs termsig's gcemeta source at its defaults against the
// metadata server at host, and reports each new value of gceKey.
func termsigGCE(host string) *watch {
	n := termsig.Config{Logger: discard}.New(gcemeta.New(gcemeta.Config{Host: host, Logger: discard}))
	return notifierWatch(n, func(nt termsig.Notice) (string, bool) {
		return nt.Raw, nt.Event == gcemeta.EventMaintenance
	})
}

// subscribe runs Client.SubscribeWithContext of compute/metadata on gceKey
// against the metadata server at host, and reports each value its callback
// gets (a failure as a value that says so).
//
// The client's HTTP client is the package's own for subscriptions (a
// transport with a 2 s connect timeout, no request timeout), except that
// it dials host wherever the request goes: the package takes the host
// from GCE_METADATA_HOST, which is one per process, and the bench runs
// several fakes at once.
func subscribe(host string) *watch {
	dialer := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dialer.DialContext(ctx, network, host)
	}}
	c := metadata.NewWithOptions(&metadata.Options{Client: &http.Client{Transport: tr}})
	ctx, cancel := context.WithCancel(context.Background())
	w := newWatch(cancel)
	w.wg.Go(func() {
		defer tr.CloseIdleConnections()
		err := c.SubscribeWithContext(ctx, gceKey, func(_ context.Context, v string, _ bool) error {
			w.report(v)
			return nil
		})
		if ctx.Err() == nil {
			w.report("Subscribe returned: " + err.Error())
		}
	})
	return w
}

// gceResult holds the latencies of the GCE rows, per client in the order
// of gceNames.
type gceResult struct {
	single, second [2][]time.Duration
}

// gceLane runs the GCE latency rows: both clients watch gceKey on one fake
// metadata server; trials single changes, then trials pairs of changes
// 10 to 100 ms apart (spread evenly), timing each client's sight of the
// second.
func gceLane(ctx context.Context, trials int) (gceResult, error) {
	var res gceResult
	srv := gcemetatest.NewServer()
	defer srv.Close()
	g := &gceRig{srv: srv, value: noEvent, ws: [2]*watch{termsigGCE(srv.Host()), subscribe(srv.Host())}}
	defer g.ws[1].stop()
	defer g.ws[0].stop()
	for range trials {
		_, lat, err := g.change(ctx)
		if err != nil {
			return res, err
		}
		for i, d := range lat {
			res.single[i] = append(res.single[i], d)
		}
	}
	for k := range trials {
		gap := 10*time.Millisecond + time.Duration((float64(k)+0.5)/float64(trials)*float64(90*time.Millisecond))
		first, _, err := g.change(ctx)
		if err == nil {
			err = pause(ctx, time.Until(first.Add(gap)))
		}
		var lat [2]time.Duration
		if err == nil {
			_, lat, err = g.flip(ctx)
		}
		if err != nil {
			return res, err
		}
		for i, d := range lat {
			res.second[i] = append(res.second[i], d)
		}
	}
	return res, nil
}

// A gceRig is a fake metadata server with two clients watching gceKey.
type gceRig struct {
	srv    *gcemetatest.Server
	ws     [2]*watch
	value  string // gceKey's value
	before int    // the requests for gceKey before the last change
}

// change waits gceQuiet after the last change, and until both
// clients wait on a long poll, then flips gceKey (see flip). termsig's
// source follows a change with a long poll at once, but at most once per
// MinInterval/10 (100 ms at the default), counted from the last such long
// poll: after a pair of changes, the next may go out up to 200 ms after
// the pair's first. The quiet spell makes every trial start afresh, so
// that a pair's second change does not meet the previous pair's delay.
func (g *gceRig) change(ctx context.Context) (time.Time, [2]time.Duration, error) {
	if err := pause(ctx, gceQuiet); err != nil {
		return time.Time{}, [2]time.Duration{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, gceWait)
	defer cancel()
	err := g.srv.Await(wctx, func() bool {
		return g.srv.Requests(gceKey) >= g.before+len(g.ws) && g.srv.Waiting(gceKey) == len(g.ws)
	})
	if err != nil {
		return time.Time{}, [2]time.Duration{}, err
	}
	return g.flip(ctx)
}

// flip sets gceKey to its other value now, and returns when, and how long
// each client took to see it.
func (g *gceRig) flip(ctx context.Context) (time.Time, [2]time.Duration, error) {
	var lat [2]time.Duration
	for _, w := range g.ws {
		w.drain()
	}
	g.before = g.srv.Requests(gceKey)
	if g.value == migrate {
		g.value = noEvent
	} else {
		g.value = migrate
	}
	start := time.Now()
	g.srv.Set(gceKey, g.value)
	for i, w := range g.ws {
		at, err := w.next(ctx, g.value, gceWait)
		if err != nil {
			return start, lat, fmt.Errorf("%s: %w", gceNames[i], err)
		}
		lat[i] = at.Sub(start)
	}
	return start, lat, nil
}

// spinRates runs both clients for window against fakes of their own that
// ignore wait_for_change, and returns the requests per minute for gceKey
// of each, after idleSettle to leave the start-up reads out.
func spinRates(ctx context.Context, window time.Duration) ([2]float64, error) {
	var rates [2]float64
	starts := [2]func(string) *watch{termsigGCE, subscribe}
	var srvs [2]*gcemetatest.Server
	var ws [2]*watch
	for i := range srvs {
		srvs[i] = gcemetatest.NewServer()
		srvs[i].Inject(termsigtest.Fault{NoLongPoll: true})
		ws[i] = starts[i](srvs[i].Host())
	}
	err := pause(ctx, idleSettle)
	var base [2]int
	for i, srv := range srvs {
		base[i] = srv.Requests(gceKey)
	}
	began := time.Now()
	if err == nil {
		err = pause(ctx, window)
	}
	elapsed := time.Since(began)
	for i, srv := range srvs {
		rates[i] = float64(srv.Requests(gceKey)-base[i]) / elapsed.Minutes()
	}
	for i, srv := range srvs {
		ws[i].stop()
		srv.Close()
	}
	return rates, err
}
