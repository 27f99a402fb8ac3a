package imdstest_test

import (
	"fmt"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/termsigtest"
)

// A test of your own consumer: schedule a spot interruption in the fake and
// check what your code does with the notice.
func Example() {
	srv := imdstest.NewServer()
	defer srv.Close()

	n := termsig.New(imds.New(imds.Config{
		Endpoint: srv.URL,
		Interval: 10 * time.Millisecond, // fast polling for the test
	}))
	defer n.Stop()

	srv.SetInterruption("stop", time.Date(2026, 11, 30, 10, 2, 0, 0, time.UTC))
	nt := <-n.C()
	fmt.Println(nt.Kind, nt.Kind.Imminent(), nt.Deadline.Format(time.RFC3339))
	// Output: stop true 2026-11-30T10:02:00Z
}

// A test that a program rides out a faulty IMDS: a proxy's page where
// IMDS should answer is an error in Notifier.Status, not a notice, and
// the interruption is reported once IMDS answers again.
func ExampleServer_Inject() {
	srv := imdstest.NewServer()
	defer srv.Close()
	srv.Inject(termsigtest.Fault{Key: imdstest.PathInstanceAction, Body: "<html>Welcome</html>"})

	n := termsig.New(imds.New(imds.Config{
		Endpoint: srv.URL,
		Interval: imds.FloorInterval,
		Events:   imds.SpotInterruption,
	}))
	defer n.Stop()
	<-n.Ready() // the first poll has been answered, here with the page
	fmt.Println(n.Status()[0].Err)

	srv.ClearFaults()
	srv.SetInterruption("terminate", time.Date(2026, 11, 30, 10, 2, 0, 0, time.UTC))
	nt := <-n.C()
	fmt.Println(nt.Kind, nt.Deadline.Format(time.RFC3339))
	// Output:
	// imds: spot/instance-action: invalid payload: not a JSON object: "<html>Welcome</html>"
	// terminate 2026-11-30T10:02:00Z
}
