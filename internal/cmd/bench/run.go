package main

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"time"
)

// results are what the stages measured, for the table.
type results struct {
	imds       [][]time.Duration // per IMDS client, in the order of imdsClients
	gce        gceResult
	spin       [2]float64 // requests per minute per key, in the order of gceNames
	idleWindow time.Duration
	idle       []float64    // requests per minute, see idleLane.stop
	notify     []notifyIdle // examples/notices, then the references
	notifyErr  error        // errNoProc where there is no /proc
}

// run runs the benchmark's stages one after the other, and writes the
// table to out:
//
//  1. the latency rows, every client side by side, while the idle
//     clients are counted;
//  2. the clients against a server that ignores wait_for_change, alone
//     but for the idle clients, since one of them spins;
//  3. examples/notices at idle, alone but for the references, which put its
//     figure in scale.
//
// examples/notices is built first, unless o.notify names a binary.
func run(ctx context.Context, o options, out io.Writer) error {
	began := time.Now()
	bin := o.notify
	if bin == "" {
		dir, err := os.MkdirTemp("", "termsig-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if bin, err = buildNotify(ctx, dir); err != nil {
			return err
		}
	}
	var res results
	idle, err := startIdle(ctx, o)
	if err != nil {
		return err
	}
	res.imds, res.gce, err = latencyStage(ctx, o)
	if err == nil {
		res.spin, err = spinRates(ctx, o.spin)
	}
	res.idleWindow, res.idle = idle.stop()
	if err != nil {
		return err
	}
	res.notify, res.notifyErr = notifyStage(ctx, o, bin)
	if res.notifyErr != nil && !errors.Is(res.notifyErr, errNoProc) {
		return res.notifyErr
	}
	return writeTable(out, o, res, time.Since(began))
}

// latencyStage runs the IMDS lanes and the GCE lane side by side, and
// returns their latencies. The first lane to fail stops the others.
func latencyStage(ctx context.Context, o options) ([][]time.Duration, gceResult, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	clients := imdsClients(o)
	lat := make([][]time.Duration, len(clients))
	var gce gceResult
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			var err error
			if lat[i], err = imdsLane(ctx, c, o.trials, o.lane); err != nil {
				cancel(err)
			}
		})
	}
	wg.Go(func() {
		var err error
		if gce, err = gceLane(ctx, o.trials); err != nil {
			cancel(err)
		}
	})
	wg.Wait()
	return lat, gce, context.Cause(ctx)
}
