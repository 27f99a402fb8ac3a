package fake_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/alibaba"
	"github.com/termsig/termsig/tencent"
)

// The scripted release reaches the alibaba source with its time, --notice
// after it appeared, as the line printed says, in the security hardening
// mode only with --hardened.
func TestAlibabaReleaseReachesTheSourceWithItsTime(t *testing.T) {
	t.Parallel()
	r := start(t, "alibaba", "--spot-in", "50ms", "--notice", "90s", "--hardened")
	url, env := r.ready(t, "alibaba", "ALIBABA_METADATA_ENDPOINT")
	assert.Equal(t, url, env)
	plan := r.out.await(t, "termsig fake alibaba: scheduled:")
	assert.Contains(t, plan, "a spot instance's release at ")
	assert.Contains(t, plan, "; the security hardening mode only (a request without a token gets 403)")

	n := notifier(t, alibaba.New(alibaba.Config{Endpoint: url, Interval: alibaba.FloorInterval, RequireToken: true, Logger: discard}))
	nt := receive(t, n, event(alibaba.EventTermination))
	assert.Equal(t, termsig.Terminate, nt.Kind)
	line := r.out.await(t, "spot release: instance/spot/termination-time answers ")
	assert.Contains(t, line, nt.Deadline.UTC().Format("2006-01-02T15:04:05Z"))
	assert.WithinDuration(t, stamped(t, line).Add(90*time.Second), nt.Deadline, time.Second, "--notice 90s")
	assert.Empty(t, r.errs.String())
	n.Stop()
	assert.Equal(t, 0, r.stop(t))
}

// The scripted reclaim reaches the tencent source, its time printed in
// UTC+8 as Tencent writes it, and read so; its time passing is said.
func TestTencentReclaimIsWrittenAndReadInChinaStandardTime(t *testing.T) {
	t.Parallel()
	r := start(t, "tencent", "--spot-in", "0s", "--notice", "0s")
	url, _ := r.ready(t, "tencent", "TENCENT_METADATA_ENDPOINT")
	n := notifier(t, tencent.New(tencent.Config{Endpoint: url, Interval: tencent.FloorInterval, Logger: discard}))
	nt := receive(t, n, event(tencent.EventTermination))
	assert.Equal(t, termsig.Terminate, nt.Kind)
	line := r.out.await(t, "spot reclaim: spot/termination-time answers ")
	utc8 := time.FixedZone("UTC+8", 8*3600)
	assert.Contains(t, line, "answers "+nt.Deadline.In(utc8).Format("2006-01-02 15:04:05"))
	assert.Equal(t, nt.Deadline.In(utc8).Format("2006-01-02 15:04:05"), nt.Raw)
	assert.WithinDuration(t, stamped(t, line), nt.Deadline, time.Second, "--notice 0")
	r.out.await(t, "the spot reclaim's time: a real instance would be reclaimed now (the fake goes on serving)")
}

// Without an event flag the fakes serve a quiet host, in both of
// Alibaba's modes unless --hardened.
func TestSpotFakesWithoutEventFlagsServeAQuietHost(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"alibaba", "tencent"} {
		r := start(t, name)
		url, _ := r.ready(t, name, map[string]string{"alibaba": "ALIBABA_METADATA_ENDPOINT", "tencent": "TENCENT_METADATA_ENDPOINT"}[name])
		assert.Contains(t, r.out.await(t, "termsig fake "+name+": "+"a quiet host"), "nothing scheduled")
		var src termsig.Source = tencent.New(tencent.Config{Endpoint: url, Logger: discard})
		if name == "alibaba" {
			src = alibaba.New(alibaba.Config{Endpoint: url, Logger: discard})
		}
		n := notifier(t, src)
		ready(t, n)
		require.NoError(t, n.Status()[0].Err, name)
		n.Stop()
		for nt := range n.C() {
			t.Errorf("%s: a notice from a quiet host: %v", name, nt)
		}
	}
}
