package termsig_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
)

func TestKind(t *testing.T) {
	for _, tc := range []struct {
		k        termsig.Kind
		word     string
		imminent bool
	}{
		{termsig.Terminate, "terminate", true},
		{termsig.Stop, "stop", true},
		{termsig.Hibernate, "hibernate", true},
		{termsig.Reboot, "reboot", true},
		{termsig.Interrupt, "interrupt", true},
		{termsig.Reload, "reload", false},
		{termsig.Rebalance, "rebalance", false},
		{termsig.Maintenance, "maintenance", false},
		{termsig.Cleared, "cleared", false},
		{0, "kind(0)", false},
		{200, "kind(200)", false},
	} {
		t.Run(tc.word, func(t *testing.T) {
			assert.Equal(t, tc.word, tc.k.String())
			assert.Equal(t, tc.imminent, tc.k.Imminent())
			text, err := tc.k.MarshalText()
			if tc.k == 0 || tc.k == 200 {
				assert.Error(t, err)
				_, err = termsig.ParseKind(tc.word)
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			var back termsig.Kind
			require.NoError(t, back.UnmarshalText(text))
			assert.Equal(t, tc.k, back)
		})
	}
}

func TestParseKindAnyCase(t *testing.T) {
	k, err := termsig.ParseKind("ReLoad")
	require.NoError(t, err)
	assert.Equal(t, termsig.Reload, k)
	_, err = termsig.ParseKind("")
	assert.ErrorContains(t, err, `unknown kind ""`)
}

func TestNoticeJSON(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.UTC)
	for _, tc := range []struct {
		name string
		in   termsig.Notice
		want string
	}{
		{"empty", termsig.Notice{}, `{}`},
		{
			"spot",
			termsig.Notice{Source: "imds", Kind: termsig.Stop, Event: "spot/instance-action", Reason: "spot interruption: stop",
				Deadline: at.Add(2 * time.Minute), Observed: at, Raw: `{"action":"stop"}`},
			`{"source":"imds","kind":"stop","event":"spot/instance-action","reason":"spot interruption: stop",` +
				`"deadline":"2026-11-30T10:02:00.123456789Z","observed":"2026-11-30T10:00:00.123456789Z","raw":"{\"action\":\"stop\"}"}`,
		},
		{
			"signal",
			termsig.Notice{Source: "signal", Kind: termsig.Terminate, Event: "SIGTERM", Reason: "SIGTERM", Signal: syscall.SIGTERM, Observed: at},
			`{"source":"signal","kind":"terminate","event":"SIGTERM","reason":"SIGTERM","observed":"2026-11-30T10:00:00.123456789Z","signal":"SIGTERM"}`,
		},
		{"sighup", termsig.Notice{Kind: termsig.Reload, Signal: syscall.SIGHUP}, `{"kind":"reload","signal":"SIGHUP"}`},
		{
			"held",
			termsig.Notice{Source: "asg", Kind: termsig.Terminate, Event: "asg/lifecycle", Deadline: at.Add(time.Hour), Observed: at,
				Held: true, HoldLimit: at.Add(48 * time.Hour)},
			`{"source":"asg","kind":"terminate","event":"asg/lifecycle","deadline":"2026-11-30T11:00:00.123456789Z",` +
				`"observed":"2026-11-30T10:00:00.123456789Z","held":true,"hold_limit":"2026-12-02T10:00:00.123456789Z"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.in)
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(b))
			var out termsig.Notice
			require.NoError(t, json.Unmarshal(b, &out))
			assert.Equal(t, tc.in, out, "a round trip gives an equal Notice")
		})
	}
}

func TestNoticeJSONTimesFromNow(t *testing.T) {
	// time.Now carries a monotonic reading and the local zone: after the
	// round trip the times are equal instants, in UTC.
	in := termsig.Notice{Kind: termsig.Terminate, Observed: time.Now(), Deadline: time.Now().In(time.FixedZone("X", 3600)).Add(time.Minute)}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	var out termsig.Notice
	require.NoError(t, json.Unmarshal(b, &out))
	assert.True(t, in.Observed.Equal(out.Observed), "%v != %v", in.Observed, out.Observed)
	assert.True(t, in.Deadline.Equal(out.Deadline))
	assert.Equal(t, time.UTC, out.Deadline.Location())
	// A Notice inside another value uses the same form.
	b, err = json.Marshal(map[string]termsig.Notice{"n": {Kind: termsig.Cleared, Event: "rebalance"}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"n":{"kind":"cleared","event":"rebalance"}}`, string(b))
}

func TestNoticeJSONErrors(t *testing.T) {
	_, err := json.Marshal(termsig.Notice{Kind: 42})
	assert.ErrorContains(t, err, "invalid kind 42")
	for _, tc := range []struct{ in, err string }{
		{`{"kind":"explode"}`, `unknown kind "explode"`},
		{`{"signal":"SIGNOPE"}`, `unknown signal "SIGNOPE"`},
		{`{"deadline":"tomorrow"}`, `cannot parse`},
		{`{"kind":7}`, `cannot unmarshal`},
		{`[]`, `cannot unmarshal array`},
		{`{`, `unexpected end`},
	} {
		var n termsig.Notice
		assert.ErrorContains(t, json.Unmarshal([]byte(tc.in), &n), tc.err, tc.in)
	}
}

func TestNoticeLogValue(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	log.Info("got", "notice", termsig.Notice{Source: "signal", Kind: termsig.Terminate, Event: "SIGTERM", Reason: "SIGTERM",
		Signal: syscall.SIGTERM, Observed: at, Deadline: at.Add(time.Minute), Raw: "not logged"})
	assert.Equal(t, "level=INFO msg=got notice.source=signal notice.kind=terminate notice.event=SIGTERM notice.reason=SIGTERM "+
		"notice.deadline=2026-11-30T10:01:00.000Z notice.observed=2026-11-30T10:00:00.000Z notice.signal=SIGTERM\n", buf.String())
	buf.Reset()
	log.Info("got", "notice", termsig.Notice{Source: "asg", Kind: termsig.Terminate, Observed: at, Deadline: at.Add(time.Hour),
		Held: true, HoldLimit: at.Add(2 * time.Hour)})
	assert.Equal(t, "level=INFO msg=got notice.source=asg notice.kind=terminate notice.deadline=2026-11-30T11:00:00.000Z "+
		"notice.observed=2026-11-30T10:00:00.000Z notice.held=true notice.hold_limit=2026-11-30T12:00:00.000Z\n", buf.String())
}

func TestDrainContext(t *testing.T) {
	parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	cancelParent() // the context the notice cancelled

	t.Run("ends margin before the deadline", func(t *testing.T) {
		dl := time.Now().Add(time.Hour)
		nt := termsig.Notice{Kind: termsig.Terminate, Deadline: dl, Observed: time.Now()}
		ctx, cancel := nt.DrainContext(parent, termsig.Drain{Margin: 10 * time.Second, Fallback: time.Minute})
		defer cancel()
		require.NoError(t, ctx.Err(), "not cancelled with its parent")
		assert.Equal(t, "v", ctx.Value(ctxKey{}), "keeps the parent's values")
		end, ok := ctx.Deadline()
		require.True(t, ok)
		assert.True(t, end.Equal(dl.Add(-10*time.Second)), "margin before the deadline: %v", end)
	})
	t.Run("ends fallback after Observed without a deadline", func(t *testing.T) {
		obs := time.Now().Add(-time.Second)
		nt := termsig.Notice{Kind: termsig.Terminate, Observed: obs}
		ctx, cancel := nt.DrainContext(parent, termsig.Drain{Margin: 10 * time.Second, Fallback: time.Minute})
		defer cancel()
		end, _ := ctx.Deadline()
		assert.True(t, end.Equal(obs.Add(time.Minute)), "fallback after Observed, margin not taken off: %v", end)
	})
	t.Run("ends fallback after now when nothing is known", func(t *testing.T) {
		before := time.Now()
		ctx, cancel := termsig.Notice{}.DrainContext(context.Background(), termsig.Drain{Fallback: time.Minute})
		defer cancel()
		end, _ := ctx.Deadline()
		assert.False(t, end.Before(before.Add(time.Minute)))
	})
	t.Run("zero Drain ends at the deadline or after the default fallback", func(t *testing.T) {
		dl := time.Now().Add(time.Hour)
		ctx, cancel := termsig.Notice{Deadline: dl}.DrainContext(parent, termsig.Drain{})
		defer cancel()
		end, _ := ctx.Deadline()
		assert.True(t, end.Equal(dl), "at the deadline: %v", end)

		obs := time.Now()
		ctx, cancel = termsig.Notice{Observed: obs}.DrainContext(parent, termsig.Drain{})
		defer cancel()
		require.NoError(t, ctx.Err(), "a zero Fallback is the default, not no time at all")
		end, _ = ctx.Deadline()
		assert.True(t, end.Equal(obs.Add(termsig.DefaultDrainFallback)), "DefaultDrainFallback after Observed: %v", end)
	})
	t.Run("time left no more than the margin gives a done context", func(t *testing.T) {
		for _, left := range []time.Duration{time.Second, 5 * time.Second, -time.Second} {
			dl := time.Now().Add(left)
			nt := termsig.Notice{Source: "gcemeta", Kind: termsig.Terminate, Deadline: dl}
			ctx, cancel := nt.DrainContext(parent, termsig.Drain{Margin: 5 * time.Second, Fallback: time.Minute})
			defer cancel()
			require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded, "%v left: done when DrainContext returns", left)
			end, _ := ctx.Deadline()
			assert.True(t, end.Equal(dl.Add(-5*time.Second)), "the deadline less the margin: %v", end)
			assert.False(t, end.After(time.Now()))
			assert.ErrorIs(t, context.Cause(ctx), context.DeadlineExceeded)
			assert.ErrorContains(t, context.Cause(ctx), "termsig: time to drain is up: gcemeta: terminate")
			got, ok := termsig.Cause(ctx)
			require.True(t, ok)
			assert.Equal(t, nt, got)
		}
	})
	t.Run("far deadline, and the cap its doc gives", func(t *testing.T) {
		far := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
		nt := termsig.Notice{Source: "azure", Kind: termsig.Terminate, Deadline: far, Observed: time.Now().Add(-time.Minute)}
		ctx, cancel := nt.DrainContext(parent, termsig.Drain{Margin: 5 * time.Second, Fallback: time.Minute})
		defer cancel()
		end, _ := ctx.Deadline()
		assert.True(t, end.Equal(far.Add(-5*time.Second)), "not bounded by DrainContext: %v", end)

		// Observed a minute ago: the capped drain is over already.
		if limit := nt.Observed.Add(30 * time.Second); nt.Deadline.After(limit) {
			nt.Deadline = limit
		}
		ctx, cancel = nt.DrainContext(parent, termsig.Drain{})
		defer cancel()
		require.Error(t, ctx.Err(), "capped: done 30 s after the notice")
		got, ok := termsig.Cause(ctx)
		require.True(t, ok)
		assert.Equal(t, nt, got, "the cause names the notice with its capped deadline")
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := termsig.Notice{}.DrainContext(context.Background(), termsig.Drain{Fallback: time.Hour})
		cancel()
		assert.ErrorIs(t, ctx.Err(), context.Canceled)
	})
}

type ctxKey struct{}

func TestNoticeString(t *testing.T) {
	obs := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		n    termsig.Notice
		want string
	}{
		{"empty", termsig.Notice{}, "unknown: kind(0)"},
		{"signal", termsig.Notice{Source: "signal", Kind: termsig.Terminate, Reason: "SIGTERM", Signal: syscall.SIGTERM, Observed: obs}, "signal: terminate (SIGTERM)"},
		{
			"deadline",
			termsig.Notice{Source: "imds", Kind: termsig.Terminate, Reason: "spot interruption: terminate", Observed: obs, Deadline: obs.Add(119500 * time.Millisecond)},
			"imds: terminate (spot interruption: terminate), deadline 2026-11-30T10:01:59Z (in 1m59.5s)",
		},
		{
			"past deadline",
			termsig.Notice{Source: "imds", Kind: termsig.Maintenance, Observed: obs, Deadline: obs.Add(-time.Second)},
			"imds: maintenance, deadline 2026-11-30T09:59:59Z (1s ago)",
		},
		{
			"deadline not observed",
			termsig.Notice{Source: "gcemeta", Kind: termsig.Terminate, Deadline: obs},
			"gcemeta: terminate, deadline 2026-11-30T10:00:00Z",
		},
		{
			"held",
			termsig.Notice{Source: "asg", Kind: termsig.Terminate, Observed: obs, Deadline: obs.Add(time.Hour), Held: true, HoldLimit: obs.Add(48 * time.Hour)},
			"asg: terminate, deadline 2026-11-30T11:00:00Z (in 1h0m0s), held up to 2026-12-02T10:00:00Z",
		},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.n.String()) })
	}
}

func TestNoticeJSONUnnamedAndForeignSignals(t *testing.T) {
	in := termsig.Notice{Kind: termsig.Terminate, Signal: syscall.Signal(40)}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	assert.JSONEq(t, `{"kind":"terminate","signal":"signal 40"}`, string(b))
	var out termsig.Notice
	require.NoError(t, json.Unmarshal(b, &out))
	assert.Equal(t, in, out)

	_, err = json.Marshal(termsig.Notice{Kind: termsig.Terminate, Signal: foreignSignal{}})
	assert.ErrorContains(t, err, `signal "foreign" is not a system signal`)

	for _, bad := range []string{`"signal 0"`, `"signal -1"`, `"signal x"`, `"signal 99999999999"`} {
		assert.Error(t, json.Unmarshal([]byte(`{"signal":`+bad+`}`), &out), bad)
	}
}

type foreignSignal struct{}

func (foreignSignal) String() string { return "foreign" }
func (foreignSignal) Signal()        {}

func TestNoticeJSONNullLeavesItAlone(t *testing.T) {
	n := termsig.Notice{Kind: termsig.Reboot}
	require.NoError(t, json.Unmarshal([]byte(`null`), &n))
	assert.Equal(t, termsig.Reboot, n.Kind)
}

func TestNoticeLogValueLeavesOutZeroKind(t *testing.T) {
	v := termsig.Notice{Source: "x"}.LogValue()
	assert.Equal(t, "[source=x]", v.String())
}

func TestDrainContextNegativeDurations(t *testing.T) {
	dl := time.Now().Add(time.Hour)
	ctx, cancel := termsig.Notice{Deadline: dl}.DrainContext(context.Background(), termsig.Drain{Margin: -time.Minute})
	defer cancel()
	end, _ := ctx.Deadline()
	assert.True(t, end.Equal(dl), "a negative margin counts as zero: never past the deadline")

	obs := time.Now()
	ctx2, cancel2 := termsig.Notice{Observed: obs}.DrainContext(context.Background(), termsig.Drain{Fallback: -time.Minute})
	defer cancel2()
	end, _ = ctx2.Deadline()
	assert.True(t, end.Equal(obs.Add(termsig.DefaultDrainFallback)), "a negative fallback is the default: %v", end)
}
