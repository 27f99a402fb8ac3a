package fake_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
)

func imdsSource(url string) *imds.Source {
	return imds.New(imds.Config{Endpoint: url, Interval: imds.FloorInterval, AdvisoryInterval: imds.FloorInterval, Logger: discard})
}

var spotTime = regexp.MustCompile(`"time":"([^"]+)"`)

// The scripted spot interruption reaches the imds source with its action
// and its time, --notice after it appeared, as the line printed says; so
// does the rebalance recommendation.
func TestIMDSSpotInterruptionReachesTheSourceWithItsActionAndTime(t *testing.T) {
	t.Parallel()
	r := start(t, "imds", "--spot-in", "50ms", "--action", "Stop", "--notice", "90s", "--rebalance-in", "0s")
	url, env := r.ready(t, "imds", "AWS_EC2_METADATA_SERVICE_ENDPOINT")
	assert.Equal(t, url, env)
	plan := r.out.await(t, "termsig fake imds: scheduled:")
	assert.Contains(t, plan, "a spot interruption (stop) at ")
	assert.Contains(t, plan, "a rebalance recommendation at ")

	n := notifier(t, imdsSource(url))
	rebalance := receive(t, n, event("rebalance"))
	assert.Equal(t, termsig.Rebalance, rebalance.Kind)
	spot := receive(t, n, event("spot/instance-action"))
	assert.Equal(t, termsig.Stop, spot.Kind)

	line := r.out.await(t, `spot interruption: spot/instance-action answers {"action":"stop","time":"`)
	m := spotTime.FindStringSubmatch(line)
	require.NotNil(t, m, line)
	at, err := time.Parse(time.RFC3339, m[1])
	require.NoError(t, err)
	assert.True(t, spot.Deadline.Equal(at), "deadline %v, printed %v", spot.Deadline, at)
	assert.WithinDuration(t, stamped(t, line).Add(90*time.Second), at, time.Second, "--notice 90s")

	assert.Contains(t, r.out.await(t, "rebalance recommendation: "), `events/recommendations/rebalance answers {"noticeTime":"`)
	assert.Contains(t, r.out.await(t, "first request: "), " from 127.0.0.1:")
	assert.Empty(t, r.errs.String())
	n.Stop()
	assert.Equal(t, 0, r.stop(t))
}

// --spot-in 0 is at once: the source's first look already sees the
// interruption, and with --notice 0 its time has come too.
func TestIMDSEventAtZeroIsSeenByTheFirstLook(t *testing.T) {
	t.Parallel()
	r := start(t, "imds", "--spot-in", "0s", "--notice", "0s")
	url, _ := r.ready(t, "imds", "AWS_EC2_METADATA_SERVICE_ENDPOINT")
	n := notifier(t, imdsSource(url))
	ready(t, n)
	select {
	case nt := <-n.C():
		assert.Equal(t, termsig.Terminate, nt.Kind)
		assert.Equal(t, "spot/instance-action", nt.Event)
	default:
		t.Fatal("the first look did not see the interruption")
	}
	assert.Contains(t, r.out.await(t, "the spot interruption's time: "), "a real instance would be terminated now")
}

// Without an event flag the fake is a quiet host: it says so, and the
// source's first look finds nothing.
func TestIMDSWithoutEventFlagsServesAQuietHost(t *testing.T) {
	t.Parallel()
	r := start(t, "imds")
	url, _ := r.ready(t, "imds", "AWS_EC2_METADATA_SERVICE_ENDPOINT")
	assert.Equal(t, "termsig fake imds: a quiet host: nothing scheduled", r.out.await(t, "termsig fake imds: a quiet"))
	n := notifier(t, imdsSource(url))
	ready(t, n)
	select {
	case nt := <-n.C():
		t.Fatalf("a notice from a quiet host: %v", nt)
	default:
	}
	r.out.await(t, "first request: ")
	assert.Equal(t, 0, r.stop(t))
}
