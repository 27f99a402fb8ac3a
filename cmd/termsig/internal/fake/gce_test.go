package fake_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/gcemeta"
)

func gceSource(host string) *gcemeta.Source {
	return gcemeta.New(gcemeta.Config{Host: host, MinInterval: gcemeta.FloorInterval, Logger: discard})
}

// The scripted preemption and a TERMINATE_ON_HOST_MAINTENANCE reach the
// gcemeta source as Terminate notices, 30 s and 60 s ahead, and the lines
// printed say what the metadata server answers and what a real VM goes
// through.
func TestGCEPreemptionAndTerminatingMaintenanceReachTheSource(t *testing.T) {
	t.Parallel()
	r := start(t, "gce", "--preempt-in", "0s", "--maintenance-in", "30ms", "--maintenance", "terminate_on_host_maintenance")
	url, host := r.ready(t, "gce", "GCE_METADATA_HOST")
	assert.Equal(t, "http://"+host, url, "GCE_METADATA_HOST is a host:port")
	plan := r.out.await(t, "termsig fake gce: scheduled:")
	assert.Contains(t, plan, "host maintenance (TERMINATE_ON_HOST_MAINTENANCE) at ")

	n := notifier(t, gceSource(host))
	preempted := receive(t, n, event(gcemeta.EventPreempted))
	assert.Equal(t, termsig.Terminate, preempted.Kind)
	line := r.out.await(t, "preemption: instance/preempted answers TRUE")
	assert.Contains(t, line, "a real VM gets an ACPI soft-off now (the fake sends none) and is powered off 30s later")
	assert.WithinDuration(t, stamped(t, line).Add(30*time.Second), preempted.Deadline, time.Second)

	maintenance := receive(t, n, event(gcemeta.EventMaintenance))
	assert.Equal(t, termsig.Terminate, maintenance.Kind)
	line = r.out.await(t, "maintenance notice: instance/maintenance-event answers TERMINATE_ON_HOST_MAINTENANCE")
	assert.Contains(t, line, "the event starts in 1m0s")
	assert.WithinDuration(t, stamped(t, line).Add(time.Minute), maintenance.Deadline, time.Second)
	n.Stop()
	assert.Equal(t, 0, r.stop(t))
	assert.Empty(t, r.errs.String())
}

// The default --maintenance is a live migration, which the source reports
// as maintenance, not termination.
func TestGCEMaintenanceIsALiveMigrationByDefault(t *testing.T) {
	t.Parallel()
	r := start(t, "gce", "--maintenance-in", "0s")
	_, host := r.ready(t, "gce", "GCE_METADATA_HOST")
	n := notifier(t, gceSource(host))
	nt := receive(t, n, event(gcemeta.EventMaintenance))
	assert.Equal(t, termsig.Maintenance, nt.Kind)
	assert.Contains(t, r.out.await(t, "maintenance notice: "), "answers MIGRATE_ON_HOST_MAINTENANCE")
}
