//go:build linux

package systemdtest_test

import (
	"fmt"
	"os"
	"syscall"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/signal"
	"github.com/termsig/termsig/signal/systemdtest"
)

// A test of a program's stop under systemd: a private bus, a fake
// systemd whose unit stops with a 30 s timeout, and a SIGTERM as systemd
// would send it. (In a test, systemdtest.Start(t, …) does the first two
// and closes them when t ends.)
func Example() {
	bus, err := systemdtest.StartBus()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer bus.Close()
	fake, err := systemdtest.New(bus.Address(), systemdtest.Config{Unit: "app.service", TimeoutStopUSec: 30e6})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer fake.Close()

	n := termsig.New(signal.Config{Address: bus.Address()}.New())
	defer n.Stop()
	_ = syscall.Kill(os.Getpid(), syscall.SIGTERM) // New has installed the handler
	nt := <-n.C()
	fmt.Println(nt.Event, "gives", nt.Deadline.Sub(nt.Observed))
	// Output: SIGTERM gives 30s
}
