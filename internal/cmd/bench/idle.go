package main

import (
	"context"
	"time"

	"github.com/termsig/termsig/gcemeta/gcemetatest"
	"github.com/termsig/termsig/imds/imdstest"
)

// idleSettle is how long the idle clients run before their requests are
// counted, so that start-up reads (a token, gcemeta's first read of each
// key) do not count.
const idleSettle = time.Second

// imdsPaths are the paths a fake IMDS counts requests for: every path the
// clients under test ask for, and the token.
var imdsPaths = []string{
	imdstest.PathInstanceAction, imdstest.PathTerminationTime, imdstest.PathRebalance,
	imdstest.PathScheduled, imdstest.PathLifecycle, imdstest.PathInstanceID, "api/token",
}

// imdsRequests returns the requests srv has answered, all paths together.
func imdsRequests(srv *imdstest.Server) int {
	total := 0
	for _, p := range imdsPaths {
		total += srv.Requests(p)
	}
	return total
}

// An idleClient is a client under test left alone with a fake of its own.
type idleClient struct {
	name  string
	w     *watch
	count func() int // the requests the fake has had
	close func()     // closes the fake
	base  int        // count when the window began
}

// An idleLane counts the requests of every client under test while nothing
// happens.
type idleLane struct {
	imds, gce []*idleClient // in the order of imdsClients and gceNames
	began     time.Time
}

// startIdle starts every client under test against a fake of its own, and
// returns once they have settled, with the counting begun.
func startIdle(ctx context.Context, o options) (*idleLane, error) {
	l := &idleLane{}
	for _, c := range imdsClients(o) {
		srv := imdstest.NewServer()
		if c.advice {
			srv.SetRebalance(time.Now())
		}
		l.imds = append(l.imds, &idleClient{name: c.name, w: c.start(srv.URL),
			count: func() int { return imdsRequests(srv) }, close: srv.Close})
	}
	for i, start := range []func(string) *watch{termsigGCE, subscribe} {
		srv := gcemetatest.NewServer()
		l.gce = append(l.gce, &idleClient{name: gceNames[i], w: start(srv.Host()),
			count: func() int { return srv.Requests(gceKey) }, close: srv.Close})
	}
	err := pause(ctx, idleSettle)
	l.began = time.Now()
	for _, c := range l.all() {
		c.base = c.count()
	}
	if err != nil {
		l.stop()
	}
	return l, err
}

// all returns every idle client.
func (l *idleLane) all() []*idleClient { return append(append([]*idleClient{}, l.imds...), l.gce...) }

// stop stops the clients and closes the fakes, and returns how long the
// window was and the requests per minute of each client in it, in the
// order of l.imds then l.gce.
func (l *idleLane) stop() (time.Duration, []float64) {
	window := time.Since(l.began)
	var rates []float64
	for _, c := range l.all() {
		rates = append(rates, float64(c.count()-c.base)/window.Minutes())
		c.w.stop()
		c.close()
	}
	return window, rates
}
