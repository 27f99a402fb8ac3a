package gcemetatest_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/gcemeta"
	"github.com/termsig/termsig/gcemeta/gcemetatest"
	"github.com/termsig/termsig/termsigtest"
)

// A test of a program's own shutdown path: preempt the fake VM while the
// source waits on its long poll, and check what the program is told.
func ExampleServer() {
	srv := gcemetatest.NewServer()
	defer srv.Close()

	n := termsig.New(gcemeta.New(gcemeta.Config{Host: srv.Host()}))
	defer n.Stop()

	// Wait, without sleeping, until the source is watching.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Await(ctx, func() bool { return srv.Waiting(gcemetatest.Preempted) == 1 })

	srv.Set(gcemetatest.Preempted, "TRUE")
	nt := <-n.C()
	fmt.Println(nt.Kind, "-", nt.Reason)
	// Output: terminate - instance preempted
}

// A flaky metadata server: three 503s, then the answer. The source
// retries, and only the real value causes a notice.
func ExampleServer_Inject() {
	srv := gcemetatest.NewServer()
	defer srv.Close()
	srv.Set(gcemetatest.Preempted, "TRUE")
	srv.Inject(termsigtest.Fault{Key: gcemetatest.Preempted, Status: http.StatusServiceUnavailable, Count: 3})

	n := termsig.New(gcemeta.New(gcemeta.Config{Host: srv.Host()}))
	defer n.Stop()

	nt := <-n.C()
	fmt.Println(nt.Kind, "-", nt.Reason)
	fmt.Println("retried:", srv.Requests(gcemetatest.Preempted) >= 4)
	// Output:
	// terminate - instance preempted
	// retried: true
}
