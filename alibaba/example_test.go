package alibaba_test

import (
	"fmt"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/alibaba"
	"github.com/termsig/termsig/alibaba/alibabatest"
)

func ExampleNew() {
	// On an ECS instance: alibaba.New(alibaba.Config{}). Here a fake
	// metadata service stands in, with a spot instance whose release is
	// scheduled.
	srv := alibabatest.NewServer()
	defer srv.Close()
	srv.SetTerminationTime(time.Now().Add(5 * time.Minute))

	n := termsig.New(alibaba.New(alibaba.Config{Endpoint: srv.URL}))
	defer n.Stop()

	nt := <-n.C()
	fmt.Println(nt.Source, nt.Kind, "-", nt.Reason)
	fmt.Println("in:", nt.Deadline.Sub(nt.Observed).Round(time.Minute))
	// Output:
	// alibaba terminate - spot instance to be released
	// in: 5m0s
}
