package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"
)

// A row is one line of the table. The first row of each measure is
// termsig's, the baseline of the ratios of the rows below it.
type row struct {
	measure, client, n string
	cells              [4]string // mean (or the value), p50, p99, max
	mean               float64   // the mean, for the ratios
	compared           bool      // the row has a ratio to its baseline
}

// latencyRow summarizes lat.
func latencyRow(measure, client string, lat []time.Duration) row {
	lat = slices.Sorted(slices.Values(lat))
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	r := row{measure: measure, client: client, n: fmt.Sprint(len(lat))}
	if len(lat) == 0 {
		return r
	}
	mean := sum / time.Duration(len(lat))
	r.cells = [4]string{ms(mean), ms(percentile(lat, 50)), ms(percentile(lat, 99)), ms(lat[len(lat)-1])}
	r.mean, r.compared = float64(mean), true
	return r
}

// rateRow is a row of requests per minute, measured over window.
func rateRow(measure, client string, window time.Duration, perMin float64) row {
	return row{measure: measure, client: client, n: seconds(window),
		cells: [4]string{fmt.Sprintf("%.3g /min", perMin)}, mean: perMin, compared: true}
}

// percentile returns the p-th percentile of sorted, by nearest rank.
func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)]
}

// ms formats d in milliseconds with three significant digits or so.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 1:
		return fmt.Sprintf("%.3f ms", v)
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 100:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// seconds formats a window in whole seconds.
func seconds(d time.Duration) string { return fmt.Sprintf("%.0f s", d.Seconds()) }

// ratio formats v/base.
func ratio(v, base float64) string {
	switch r := v / base; {
	case base == 0:
		return ""
	case r >= 100:
		return fmt.Sprintf("%.0f×", r)
	case r >= 10:
		return fmt.Sprintf("%.1f×", r)
	default:
		return fmt.Sprintf("%.2f×", r)
	}
}

// rows turns res into the rows of the table.
func rows(o options, res results) []row {
	var rs []row
	for i, c := range imdsClients(o) {
		rs = append(rs, latencyRow("IMDS: spot interruption posted → seen", c.name, res.imds[i]))
	}
	for i, name := range gceNames {
		rs = append(rs, latencyRow("GCE: a single change → seen", name, res.gce.single[i]))
	}
	for i, name := range gceNames {
		rs = append(rs, latencyRow("GCE: a second change, 10–100 ms after the first → seen", name, res.gce.second[i]))
	}
	spin := fmt.Sprintf("GCE: server ignores wait_for_change, requests/min/key (%v run, scaled)", o.spin)
	for i, name := range gceNames {
		rs = append(rs, rateRow(spin, name, o.spin, res.spin[i]))
	}
	for i, c := range imdsClients(o) {
		rs = append(rs, rateRow("IMDS: requests/min at idle, every path and token", c.name, res.idleWindow, res.idle[i]))
	}
	for i, name := range gceNames {
		rs = append(rs, rateRow("GCE: requests/min/key at idle", name, res.idleWindow, res.idle[len(res.imds)+i]))
	}
	// The idle cost comes first: it is the row termsig is held to (at
	// most 1.5× the CPU of the plain net/http poller, see BENCHMARKS.md).
	return append(notifyRows(res), rs...)
}

// notifyRows are the rows of examples/notices at idle, and of the
// references measured in the same window.
func notifyRows(res results) []row {
	if res.notifyErr != nil {
		return []row{{measure: "examples/notices at idle", client: "not measured: " + res.notifyErr.Error()}}
	}
	ni := res.notify[0]
	measure := "examples/notices at idle (" + strings.TrimSpace(ni.watching) + ")"
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	n := seconds(ni.window)
	cpu := cpuCell(ni)
	for i, r := range references {
		if r.name == "nethttp" {
			ref := res.notify[1+i]
			cpu += fmt.Sprintf("; %s the plain net/http poller's", ratio(perHour(ni), perHour(ref)))
		}
	}
	rows := []row{
		{measure: measure, client: "CPU time (all threads' schedstat)", n: n, cells: [4]string{cpu}},
		{measure: measure, client: "VmRSS at the end (peak VmHWM)", n: n,
			cells: [4]string{fmt.Sprintf("%s (%s)", mib(ni.rss), mib(ni.hwm))}},
		{measure: measure, client: "requests at the fake IMDS", n: n,
			cells: [4]string{fmt.Sprintf("%.2f /s", ni.requests)}},
	}
	for i, r := range references {
		ri := res.notify[1+i]
		rows = append(rows, row{measure: measure, client: r.desc, n: seconds(ri.window),
			cells: [4]string{fmt.Sprintf("%s, %.2f requests/s", cpuCell(ri), ri.requests)}})
	}
	return rows
}

// cpuCell says how much CPU a process used at idle.
func cpuCell(ni notifyIdle) string {
	return fmt.Sprintf("%.2f CPU-s/hour (%.4f%% of a core)", perHour(ni), perHour(ni)/36)
}

// perHour is the CPU seconds per hour that ni used.
func perHour(ni notifyIdle) float64 { return ni.cpu.Seconds() / ni.window.Hours() }

// writeTable writes the machine, the options and the table.
func writeTable(w io.Writer, o options, res results, took time.Duration) error {
	var b strings.Builder
	fmt.Fprintf(&b, "machine: %s, %d cores, %s %s/%s\n", cpuModel(), runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "run: -trials %d -lane %v -handler-period %v -advised-period %v -spin %v -idle %v -warmup %v; took %v\n\n",
		o.trials, o.lane, o.handler, o.advised, o.spin, o.idle, o.warmup, took.Round(time.Second))
	b.WriteString("| measure | client | n | mean | p50 | p99 | max | mean vs termsig |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|\n")
	var base row
	for _, r := range rows(o, res) {
		measure := ""
		if r.measure != base.measure {
			base, measure = r, r.measure
		}
		cells := append([]string{measure, r.client, r.n}, r.cells[:]...)
		cells = append(cells, "")
		if r.compared && base.compared {
			cells[len(cells)-1] = ratio(r.mean, base.mean)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
