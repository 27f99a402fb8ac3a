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
	// it answers "2026-11-30 18:02:00", China Standard Time.
	srv := tencenttest.NewServer()
	defer srv.Close()
	srv.SetTerminationTime(time.Date(2026, 11, 30, 10, 2, 0, 0, time.UTC))

	n := termsig.New(tencent.New(tencent.Config{Endpoint: srv.URL}))
	defer n.Stop()

	nt := <-n.C()
	fmt.Println(nt.Source, nt.Kind, "-", nt.Reason, "-", nt.Raw)
	fmt.Println("deadline:", nt.Deadline.UTC().Format(time.RFC3339))
	// Output:
	// tencent terminate - spot instance to be reclaimed - 2026-11-30 18:02:00
	// deadline: 2026-11-30T10:02:00Z
}
