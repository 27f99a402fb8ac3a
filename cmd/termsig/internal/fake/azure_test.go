package fake_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/azure"
)

func azureSource(url string) *azure.Source {
	// No VMName: the source asks the fake, which answers --vm.
	return azure.New(azure.Config{Endpoint: url, Interval: azure.FloorInterval, Logger: discard})
}

var scheduledLine = regexp.MustCompile(`scheduled event (\S+): (\w+) of (\S+), NotBefore (.+ GMT), EventStatus Scheduled`)

// The scripted event reaches the azure source for the VM that --vm names,
// with the NotBefore that Azure gives the type; Notifier.Release
// acknowledges it, which the fake shows and which starts the event, a
// second notice.
func TestAzureEventReachesTheSourceAndReleaseIsAcknowledged(t *testing.T) {
	t.Parallel()
	r := start(t, "azure", "--vm", "web-3", "--event-in", "0s", "--type", "reboot")
	url, env := r.ready(t, "azure", "AZURE_METADATA_ENDPOINT")
	assert.Equal(t, url, env)
	line := r.out.await(t, "scheduled event ")
	m := scheduledLine.FindStringSubmatch(line)
	require.NotNil(t, m, line)
	id := m[1]
	assert.Equal(t, "Reboot", m[2])
	assert.Equal(t, "web-3", m[3])
	notBefore, err := time.Parse(http.TimeFormat, m[4])
	require.NoError(t, err)
	assert.WithinDuration(t, stamped(t, line).Add(15*time.Minute), notBefore, time.Second, "Azure's least notice of a Reboot")

	n := notifier(t, azureSource(url))
	nt := receive(t, n, event(id))
	assert.Equal(t, termsig.Reboot, nt.Kind)
	assert.True(t, nt.Deadline.Equal(notBefore), "deadline %v, NotBefore %v", nt.Deadline, notBefore)

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, n.Release(ctx, nt))
	assert.Equal(t, "acknowledgement: POST StartRequests names "+id, strings.SplitN(r.out.await(t, "acknowledgement: "), " ", 2)[1])
	started := r.out.await(t, "event "+id+" started (acknowledged)")
	assert.Contains(t, started, "EventStatus Started, NotBefore empty")
	assert.Contains(t, started, "a real VM would be rebooted now")
	again := receive(t, n, event(id))
	assert.Equal(t, "Reboot started: termsig fake: a scripted Reboot", again.Reason)
	n.Stop()
	assert.Equal(t, 0, r.stop(t))
	assert.Empty(t, r.errs.String())
}

// Once its NotBefore passes the event starts, as on Azure: with --notice 0
// at once, before the source's first look.
func TestAzureEventStartsAtItsNotBefore(t *testing.T) {
	t.Parallel()
	r := start(t, "azure", "--event-in", "0s", "--notice", "0s")
	url, _ := r.ready(t, "azure", "AZURE_METADATA_ENDPOINT")
	m := scheduledLine.FindStringSubmatch(r.out.await(t, "scheduled event "))
	require.NotNil(t, m)
	assert.Equal(t, "termsig-vm", m[3], "the default VM")
	assert.Contains(t, r.out.await(t, "started (NotBefore has passed)"), "a real VM would be evicted now")

	n := notifier(t, azureSource(url))
	nt := receive(t, n, event(m[1]))
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.True(t, strings.HasPrefix(nt.Reason, "Preempt started"), nt.Reason)
}

// Without --notice, NotBefore is Azure's least notice for the type.
func TestAzureNotBeforeIsAzuresLeastNoticeForTheType(t *testing.T) {
	t.Parallel()
	plan := regexp.MustCompile(` at (\S+), NotBefore (.+ GMT)$`)
	for typ, notice := range map[string]time.Duration{
		"Preempt":   30 * time.Second,
		"Reboot":    15 * time.Minute,
		"Redeploy":  10 * time.Minute,
		"Freeze":    15 * time.Minute,
		"Terminate": 5 * time.Minute,
	} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			r := start(t, "azure", "--event-in", "1h", "--type", typ)
			m := plan.FindStringSubmatch(r.out.await(t, "termsig fake azure: scheduled: a "+typ+" of VM termsig-vm"))
			require.NotNil(t, m)
			appear, err := time.Parse(time.RFC3339, m[1])
			require.NoError(t, err)
			notBefore, err := time.Parse(http.TimeFormat, m[2])
			require.NoError(t, err)
			assert.WithinDuration(t, appear.Add(notice), notBefore, time.Second)
			assert.Equal(t, 0, r.stop(t))
		})
	}
}
