package alibabatest_test

import (
	"fmt"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/alibaba"
	"github.com/termsig/termsig/alibaba/alibabatest"
	"github.com/termsig/termsig/termsigtest"
)

// A test of your own consumer: schedule the release of a spot instance in
// the fake and check what your code does with the notice.
func Example() {
	srv := alibabatest.NewServer()
	defer srv.Close()
	srv.SetTokensRequired(true) // the security hardening mode only

	n := termsig.New(alibaba.New(alibaba.Config{
		Endpoint: srv.URL,
		Interval: alibaba.FloorInterval, // fast polling for the test
	}))
	defer n.Stop()

	srv.SetTerminationTime(time.Now().Add(5 * time.Minute))
	nt := <-n.C()
	fmt.Println(nt.Kind, "in", nt.Deadline.Sub(nt.Observed).Round(time.Minute))
	srv.ClearTerminationTime()
	fmt.Println((<-n.C()).Kind)
	// Output:
	// terminate in 5m0s
	// cleared
}

// A test that a program rides out a faulty service: a proxy's page where
// the time should be is an error in Notifier.Status, not a notice.
func ExampleServer_Inject() {
	srv := alibabatest.NewServer()
	defer srv.Close()
	srv.Inject(termsigtest.Fault{Key: alibabatest.PathTerminationTime, Body: "<html>Welcome</html>"})

	n := termsig.New(alibaba.New(alibaba.Config{Endpoint: srv.URL, Interval: alibaba.FloorInterval}))
	defer n.Stop()
	<-n.Ready() // the first poll has been answered, here with the page
	fmt.Println(n.Status()[0].Err)

	srv.ClearFaults()
	srv.SetTerminationTime(time.Now().Add(5 * time.Minute))
	fmt.Println((<-n.C()).Kind)
	// Output:
	// alibaba: termination time: not an RFC 3339 time: 20 bytes of markup
	// terminate
}
