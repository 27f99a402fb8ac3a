package acpitest_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/acpi"
	"github.com/termsig/termsig/acpi/acpitest"
)

// worker is the code under test: it works until the machine is going away.
func worker(ctx context.Context) string {
	<-ctx.Done()
	if nt, ok := termsig.Cause(ctx); ok {
		return "handing back my work: " + nt.String()
	}
	return "stopped"
}

// A consumer of termsig tests its shutdown path with a fake acpid.
func ExampleAcpid() {
	fake, err := acpitest.NewAcpid()
	if err != nil {
		log.Fatal(err)
	}
	defer fake.Close()

	src := acpi.New(acpi.Config{Transports: acpi.Acpid, AcpidSocket: fake.Path()})
	ctx, stop := termsig.NotifyContext(context.Background(), src)
	defer stop()

	wait, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := fake.WaitClients(wait, 1); err != nil {
		log.Fatal(err)
	}
	fake.Send(acpitest.LidCloseLine) // not a reason to stop
	fake.PressPowerButton()          // the cloud's "shut down now"

	fmt.Println(worker(ctx))
	// Output: handing back my work: acpi: terminate (power button PBTN (acpid))
}

// The input transport reads a fake device: a FIFO with sysfs entries.
func ExampleInput() {
	in, err := acpitest.NewInput()
	if err != nil {
		log.Fatal(err)
	}
	defer in.Close()
	dev, err := in.AddDevice("Power Button", acpitest.KeyPower)
	if err != nil {
		log.Fatal(err)
	}

	// The fake is laid out like "/": the source finds the device at its
	// default place below Root.
	n := termsig.New(acpi.New(acpi.Config{Transports: acpi.Input, Root: in.Root()}))
	defer n.Stop()

	dev.PressPowerButton() // kept in the FIFO until the source reads it
	nt := <-n.C()
	fmt.Println(nt.Kind, nt.Reason == "power button "+dev.Path()+" (input)")
	// Output: terminate true
}
