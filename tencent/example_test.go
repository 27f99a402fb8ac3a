package tencent_test

import (
	"fmt"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/tencent"
	"github.com/termsig/termsig/tencent/tencenttest"
)

func ExampleNew() {
	// On a CVM instance: tencent.New(tencent.Config{}). Here a fake
	// metadata service stands in, with a spot instance to be reclaimed;
	// it answers a time such as "2026-11-30 18:02:00", China Standard
	// Time.
	srv := tencenttest.NewServer()
	defer srv.Close()
	srv.SetTerminationTime(time.Now().Add(2 * time.Minute))

	n := termsig.New(tencent.New(tencent.Config{Endpoint: srv.URL}))
	defer n.Stop()

	nt := <-n.C()
	fmt.Println(nt.Source, nt.Kind, "-", nt.Reason)
	fmt.Println("in:", nt.Deadline.Sub(nt.Observed).Round(time.Minute))
	// Output:
	// tencent terminate - spot instance to be reclaimed
	// in: 2m0s
}
