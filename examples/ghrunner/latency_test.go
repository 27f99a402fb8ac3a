//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghfake"
	"github.com/termsig/termsig/examples/ghrunner/internal/supervisor"
)

// apiLatency is what every call to the fake GitHub costs in the
// measurements: a round trip to api.github.com from a cloud region.
const apiLatency = 50 * time.Millisecond

// BenchmarkNoticeToCleanup measures, with apiLatency per API call, the
// time from a spot interruption appearing in IMDS, and from ghrunner's
// notice, to the re-run requested and to the registration removed, a job
// running. The interruption is posted at a random phase of the IMDS poll.
// Each iteration is a fresh fake GitHub, IMDS and ghrunner. Run
// with -benchtime 10x; GHRUNNER_BENCH_ARGS adds flags (say "-poll 200ms").
//
// In "looked-up" the job was looked up when it started, as it is when a
// job has run for more than a moment; in "search" that lookup failed, and
// the cleanup searches for the job (two calls more).
func BenchmarkNoticeToCleanup(b *testing.B) {
	b.Run("looked-up", func(b *testing.B) { benchCleanup(b, false) })
	b.Run("search", func(b *testing.B) { benchCleanup(b, true) })
}

func benchCleanup(b *testing.B, search bool) {
	var flipNotice, flipRerun, flipDelete, noticeRerun, noticeDelete []time.Duration
	calls := 0
	extra := strings.Fields(os.Getenv("GHRUNNER_BENCH_ARGS"))
	for range b.N {
		w := newWorld(b, apiLatency)
		p := w.start(append([]string{"-poll", "1s", "-imds-interval", "1s"}, extra...)...)
		r := w.onlineRunner("spot-1")
		if search {
			w.gh.Inject(ghfake.Fault{Method: "GET", Path: "/jobs", Times: 1, Status: 404})
		}
		run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "build"}}})
		w.runningOn(run, r.ID)
		if search {
			p.logLine("cannot look up the job")
		} else {
			p.logLine("the runner runs")
		}
		before := len(w.gh.Calls())
		// At a random phase of the IMDS poll, as a real interruption comes.
		time.Sleep(rand.N(interval(extra)))
		flip := time.Now()
		w.md.SetInterruption("terminate", flip.Add(2*time.Minute))
		if st := p.exit(); st != supervisor.ExitOK {
			b.Fatalf("exit status %d", st)
		}
		rerun := w.calls("POST", "/rerun-failed-jobs")
		del := w.calls("DELETE", fmt.Sprintf("/actions/runners/%d", r.ID))
		if len(rerun) != 1 || len(del) == 0 {
			b.Fatalf("%d re-runs, %d removals", len(rerun), len(del))
		}
		seen := noticeTime(b, p)
		flipNotice = append(flipNotice, seen.Sub(flip))
		flipRerun = append(flipRerun, rerun[0].At.Sub(flip))
		flipDelete = append(flipDelete, del[len(del)-1].At.Sub(flip))
		noticeRerun = append(noticeRerun, rerun[0].At.Sub(seen))
		noticeDelete = append(noticeDelete, del[len(del)-1].At.Sub(seen))
		calls += len(w.gh.Calls()) - before
	}
	b.StopTimer()
	report(b, "flip→notice", flipNotice)
	report(b, "flip→rerun", flipRerun)
	report(b, "flip→deleted", flipDelete)
	report(b, "notice→rerun", noticeRerun)
	report(b, "notice→deleted", noticeDelete)
	b.ReportMetric(float64(calls)/float64(b.N), "calls/op")
}

// interval is the -imds-interval in args, the last one given.
func interval(args []string) time.Duration {
	d := time.Second
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-imds-interval" {
			if v, err := time.ParseDuration(args[i+1]); err == nil {
				d = v
			}
		}
	}
	return d
}

// noticeTime is when ghrunner logged the imminent notice.
func noticeTime(b *testing.B, p *proc) time.Time {
	for _, line := range p.stderr.lines() {
		var rec struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && strings.Contains(rec.Msg, "imminent notice") {
			return rec.Time
		}
	}
	b.Fatal("no notice in the log")
	return time.Time{}
}

func report(b *testing.B, name string, d []time.Duration) {
	slices.Sort(d)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(d[(len(d)+1)/2-1]), name+"-p50-ms") // the median, by nearest rank
	b.ReportMetric(ms(d[len(d)-1]), name+"-max-ms")
}

// BenchmarkNoticeToWebhook measures, with apiLatency per API call and a
// job running, the time from SIGTERM sent to ghrunner to a webhook
// receiver on loopback having the notice's POST, the "re-run requested"
// and the "unregistered" ones (the latter two wait for the cleanup's API
// calls). Each iteration is a fresh fake GitHub and ghrunner. Run with
// -benchtime 20x.
func BenchmarkNoticeToWebhook(b *testing.B) {
	type arrival struct {
		text string
		at   time.Time
	}
	got := make(chan arrival, 16)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		var body struct{ Text string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		got <- arrival{body.Text, at}
	}))
	defer rcv.Close()
	var notice, rerun, unregistered []time.Duration
	for range b.N {
		w := newWorld(b, apiLatency)
		p, _, _ := w.startWithJob("-poll", "1s", "--webhook-url", rcv.URL)
		p.logLine("the runner runs")
		sentAt := time.Now()
		p.signal(syscall.SIGTERM)
		for range 3 {
			var a arrival
			select {
			case a = <-got:
			case <-time.After(wait):
				b.Fatal("the webhook got no more POSTs")
			}
			switch d := a.at.Sub(sentAt); {
			case strings.HasPrefix(a.text, "ghrunner: signal: terminate"):
				notice = append(notice, d)
			case strings.HasPrefix(a.text, "ghrunner: "+supervisor.OutcomeRerun+": "):
				rerun = append(rerun, d)
			case strings.HasPrefix(a.text, "ghrunner: "+supervisor.OutcomeUnregistered+": "):
				unregistered = append(unregistered, d)
			default:
				b.Fatalf("unexpected POST %q", a.text)
			}
		}
		if st := p.exit(); st != supervisor.ExitOK {
			b.Fatalf("exit status %d", st)
		}
	}
	b.StopTimer()
	reportQuantiles(b, "notice→posted", notice)
	reportQuantiles(b, "notice→rerun-posted", rerun)
	reportQuantiles(b, "notice→unregistered-posted", unregistered)
}

// reportQuantiles reports the p50 and p99 of d (by nearest rank) in
// milliseconds.
func reportQuantiles(b *testing.B, name string, d []time.Duration) {
	slices.Sort(d)
	rank := func(q float64) time.Duration { return d[max(int(math.Ceil(q*float64(len(d))))-1, 0)] }
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(rank(0.5)), name+"-p50-ms")
	b.ReportMetric(ms(rank(0.99)), name+"-p99-ms")
}
