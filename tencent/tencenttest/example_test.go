package tencenttest_test

import (
	"fmt"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/tencent"
	"github.com/termsig/termsig/tencent/tencenttest"
	"github.com/termsig/termsig/termsigtest"
)

// A test of your own consumer: schedule the reclaim of a spot instance in
// the fake and check what your code does with the notice.
func Example() {
	srv := tencenttest.NewServer()
	defer srv.Close()

	n := termsig.New(tencent.New(tencent.Config{
		Endpoint: srv.URL,
		Interval: tencent.FloorInterval, // fast polling for the test
	}))
	defer n.Stop()

	at := time.Now().Add(2 * time.Minute).Truncate(time.Second)
	srv.SetTerminationTime(at) // served in UTC+8, without a zone
	nt := <-n.C()
	fmt.Println(nt.Kind, nt.Deadline.Equal(at))
	srv.ClearTerminationTime()
	fmt.Println((<-n.C()).Kind)
	// Output:
	// terminate true
	// cleared
}

// A test that a program rides out a faulty service: a 503 is an error in
// Notifier.Status, not a notice.
func ExampleServer_Inject() {
	srv := tencenttest.NewServer()
	defer srv.Close()
	srv.Inject(termsigtest.Fault{Key: tencenttest.PathTerminationTime, Status: 503})

	n := termsig.New(tencent.New(tencent.Config{Endpoint: srv.URL, Interval: tencent.FloorInterval}))
	defer n.Stop()
	<-n.Ready() // the first poll has been answered, here with the 503
	fmt.Println(n.Status()[0].Err)
	// Output:
	// tencent: HTTP 503: Service Unavailable
}
