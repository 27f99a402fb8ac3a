package acpi_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/acpi"
	"github.com/termsig/termsig/acpi/acpitest"
)

func ExampleNew() {
	// In a program, acpi.New(acpi.Config{}) watches the real power button
	// through every transport the host has. Here a fake acpid stands in.
	fake, err := acpitest.NewAcpid()
	if err != nil {
		log.Fatal(err)
	}
	defer fake.Close()

	n := termsig.New(acpi.New(acpi.Config{Transports: acpi.Acpid, AcpidSocket: fake.Path()}))
	defer n.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := fake.WaitClients(ctx, 1); err != nil { // the source has connected
		log.Fatal(err)
	}
	fake.PressPowerButton() // acpid's two lines for one press: one notice

	nt := <-n.C()
	fmt.Println(nt.Source, nt.Kind, nt.Deadline.IsZero(), nt.Reason)
	// Output: acpi terminate true power button PBTN (acpid)
}

func ExampleSource_Available() {
	src := acpi.New(acpi.Config{})
	if err := src.Available(); err != nil {
		// Such as "acpi: no power-button transport (...): termsig: source
		// unavailable on this host" in a container.
		fmt.Println("the power button is not watched:", err)
	}
}
