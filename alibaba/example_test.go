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
	srv.SetTerminationTime(time.Date(2026, 11, 30, 10, 5, 0, 0, time.UTC))

	n := termsig.New(alibaba.New(alibaba.Config{Endpoint: srv.URL}))
	defer n.Stop()

	nt := <-n.C()
	fmt.Println(nt.Source, nt.Kind, "-", nt.Reason)
	fmt.Println("deadline:", nt.Deadline.Format(time.RFC3339))
	// Output:
	// alibaba terminate - spot instance to be released
	// deadline: 2026-11-30T10:05:00Z
}
