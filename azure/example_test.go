package azure_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/azure/azuretest"
)

// A spot VM is to be evicted: the program gets the notice, hands its work
// back, and releases the notice, so that Azure goes ahead now instead of
// at NotBefore.
func ExampleSource() {
	// On an Azure VM: azure.New(azure.Config{}). Here a fake metadata
	// service stands in.
	srv := azuretest.NewServer()
	defer srv.Close()
	notBefore := time.Now().UTC().Add(30 * time.Second).Truncate(time.Second) // a spot VM's 30 s
	srv.SetEvents(azuretest.Event{
		EventID:   "602d9444-d2cd-49c7-8624-8643e7171297",
		EventType: "Preempt",
		NotBefore: notBefore,
	})

	// A short Interval lets the example see the event start at once;
	// programs keep the default, a poll a second.
	n := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(azure.New(azure.Config{
		Endpoint: srv.URL,
		Interval: azure.FloorInterval,
	}))
	defer n.Stop()

	nt := <-n.C()
	fmt.Println(nt.Source, nt.Kind, "-", nt.Reason)
	fmt.Println("event", nt.Event, "due at NotBefore:", nt.Deadline.Equal(notBefore))

	// ... the work handed back ...
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Release(ctx, nt); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("acknowledged:", srv.StartRequests())

	started := <-n.C()
	fmt.Println(started.Kind, "-", started.Reason)
	// Output:
	// azure terminate - Preempt scheduled
	// event 602d9444-d2cd-49c7-8624-8643e7171297 due at NotBefore: true
	// acknowledged: [602d9444-d2cd-49c7-8624-8643e7171297]
	// terminate - Preempt started
}
