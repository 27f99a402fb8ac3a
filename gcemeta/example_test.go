package gcemeta_test

import (
	"fmt"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/gcemeta"
	"github.com/termsig/termsig/gcemeta/gcemetatest"
)

func ExampleNew() {
	// On a GCE VM: gcemeta.New(gcemeta.Config{}). Here a fake metadata
	// server stands in, with a VM that was preempted before the program
	// started.
	srv := gcemetatest.NewServer()
	defer srv.Close()
	srv.Set(gcemetatest.Preempted, "TRUE")

	n := termsig.New(gcemeta.New(gcemeta.Config{Host: srv.Host()}))
	defer n.Stop()

	nt := <-n.C()
	fmt.Println(nt.Source, nt.Kind, nt.Reason)
	fmt.Println("time left:", nt.Deadline.Sub(nt.Observed))
	// Output:
	// gcemeta terminate instance preempted
	// time left: 30s
}

func ExampleSource_Watch_maintenance() {
	srv := gcemetatest.NewServer()
	defer srv.Close()
	// A short MinInterval lets a test see changes in quick succession;
	// programs keep the default, which spaces requests 1 s apart.
	n := termsig.New(gcemeta.New(gcemeta.Config{Host: srv.Host(), MinInterval: gcemeta.FloorInterval}))
	defer n.Stop()

	// A live migration is announced, then done.
	srv.Set(gcemetatest.MaintenanceEvent, "MIGRATE_ON_HOST_MAINTENANCE")
	nt := <-n.C()
	fmt.Println(nt.Kind, nt.Kind.Imminent(), "-", nt.Reason)
	srv.Set(gcemetatest.MaintenanceEvent, "NONE")
	nt = <-n.C()
	fmt.Println(nt.Kind, nt.Kind.Imminent(), "-", nt.Reason)

	// A maintenance window is scheduled.
	srv.Set(gcemetatest.UpcomingMaintenance, `{"type":"SCHEDULED","maintenance_status":"PENDING",`+
		`"window_start_time":"2026-12-01T10:00:00Z","window_end_time":"2026-12-01T11:00:00Z"}`)
	nt = <-n.C()
	fmt.Println(nt.Kind, "from", nt.Deadline.Format(time.RFC3339))
	// Output:
	// maintenance false - host maintenance: MIGRATE_ON_HOST_MAINTENANCE
	// cleared false - host maintenance over: NONE
	// maintenance from 2026-12-01T10:00:00Z
}
