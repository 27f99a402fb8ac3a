package acpi_test

import (
	"context"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/acpi"
	"github.com/termsig/termsig/acpi/acpitest"
	"github.com/termsig/termsig/internal/timing"
)

// start runs src in a Notifier that logs to logs, stopped at the end of
// the test (before the fakes made earlier are closed).
func start(t *testing.T, logs *logRecorder, srcs ...termsig.Source) *termsig.Notifier {
	t.Helper()
	n := termsig.Config{Logger: logs.logger()}.New(srcs...)
	t.Cleanup(n.Stop)
	return n
}

func newAcpid(t *testing.T) *acpitest.Acpid {
	t.Helper()
	a, err := acpitest.NewAcpid()
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	return a
}

func newInput(t *testing.T) *acpitest.Input {
	t.Helper()
	in, err := acpitest.NewInput()
	require.NoError(t, err)
	t.Cleanup(func() { in.Close() })
	return in
}

func ctxWait(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

func send(t *testing.T, a *acpitest.Acpid, lines ...string) {
	t.Helper()
	for _, l := range lines {
		n, err := a.Send(l)
		require.NoError(t, err)
		require.Equal(t, 1, n, "one client")
	}
}

// noNotice fails if a notice is waiting on c. Call it once the log shows
// that the source has handled everything it was given: a notice it sent
// before that is in C by then.
func noNotice(t *testing.T, c <-chan termsig.Notice) {
	t.Helper()
	select {
	case nt := <-c:
		t.Fatalf("unexpected notice %v", nt)
	default:
	}
}

// Acpid

func TestAcpidPowerButton(t *testing.T) {
	fake := newAcpid(t)
	logs := newLogRecorder()
	src := acpi.New(acpi.Config{Transports: acpi.Acpid, AcpidSocket: fake.Path(), Logger: logs.logger()})
	assert.NoError(t, src.Available())
	n := start(t, logs, src)
	require.NoError(t, fake.WaitClients(ctxWait(t), 1))

	// Other ACPI events are not termination.
	others := []string{
		acpitest.LidCloseLine, acpitest.SleepButtonLine, acpitest.ACAdapterLine,
		acpitest.BatteryLine, acpitest.ThermalLine, "button/lid LID0 00000080 00000001",
		"jack/headphone HEADPHONE plug", "button/power PBTN 00000081 00000000",
	}
	send(t, fake, others...)
	_, err := fake.PressPowerButton() // two lines, one press
	require.NoError(t, err)

	nt := recv(t, n.C())
	assert.Equal(t, "acpi", nt.Source)
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Equal(t, "power-button", nt.Event)
	assert.Equal(t, "power button PBTN (acpid)", nt.Reason)
	assert.Equal(t, acpitest.PowerButtonInputLine, nt.Raw)
	assert.True(t, nt.Deadline.IsZero(), "deadline unknown")
	assert.WithinDuration(t, time.Now(), nt.Observed, wait)

	dup := logs.waitFor(t, "acpi: same press again, dropped", 1)
	assert.Equal(t, "LNXPWRBN:00", attr(dup, "device"))
	assert.Equal(t, len(others), logs.count("acpi: event ignored"))
	noNotice(t, n.C())
	assert.Equal(t, 1, logs.count("acpi: power button pressed"))
}

func TestAcpidTrailingTokenAndEveryPressWithoutDedupe(t *testing.T) {
	fake := newAcpid(t)
	logs := newLogRecorder()
	src := acpi.New(acpi.Tune(acpi.Config{Transports: acpi.Acpid, AcpidSocket: fake.Path(), Logger: logs.logger()}, acpi.Tuning{DedupeWindow: -1}))
	n := start(t, logs, src)
	require.NoError(t, fake.WaitClients(ctxWait(t), 1))

	send(t, fake, "button/power PBTN 00000080 00000000 K", "button/power LNXPWRBN:00 00000080 00000001\r")
	a, b := recv(t, n.C()), recv(t, n.C())
	assert.Equal(t, "power button PBTN (acpid)", a.Reason)
	assert.Equal(t, "button/power PBTN 00000080 00000000 K", a.Raw)
	assert.Equal(t, "power button LNXPWRBN:00 (acpid)", b.Reason)
	assert.Equal(t, "button/power LNXPWRBN:00 00000080 00000001", b.Raw)
}

func TestAcpidMalformedInputIsNeverANotice(t *testing.T) {
	fake := newAcpid(t)
	logs := newLogRecorder()
	src := acpi.New(acpi.Tune(acpi.Config{Transports: acpi.Acpid, AcpidSocket: fake.Path(), Logger: logs.logger()}, acpi.Tuning{DedupeWindow: -1}))
	n := start(t, logs, src)
	require.NoError(t, fake.WaitClients(ctxWait(t), 1))

	long := make([]byte, 5000)
	for i := range long {
		long[i] = "button/power PBTN 00000080 00000000 "[i%36]
	}
	for _, b := range [][]byte{
		[]byte("\n"),
		[]byte("button/power\n"),
		[]byte("button/power PBTN 0x80 0\n"),
		[]byte("button/power PBTN 00000080\n"),
		[]byte("\x00\xff\xfe button/power \x00 80 0\n"),
		append(long, '\n'), // too long: skipped whole, although it starts like a press
	} {
		_, err := fake.SendRaw(b)
		require.NoError(t, err)
	}
	send(t, fake, acpitest.PowerButtonLine)
	nt := recv(t, n.C())
	assert.Equal(t, acpitest.PowerButtonLine, nt.Raw, "the first notice is the real press")
	assert.Equal(t, 6, logs.count("acpi: event ignored"))
	assert.Equal(t, 1, logs.count("acpi: power button pressed"))
}

func TestAcpidReconnects(t *testing.T) {
	fake := newAcpid(t)
	logs := newLogRecorder()
	src := acpi.New(acpi.Tune(
		acpi.Config{Transports: acpi.Acpid, AcpidSocket: fake.Path(), Logger: logs.logger()},
		acpi.Tuning{Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, DedupeWindow: -1},
	))
	n := start(t, logs, src)
	ctx := ctxWait(t)
	require.NoError(t, fake.WaitClients(ctx, 1))

	for i := 1; i <= 3; i++ {
		// A line without its newline when acpid goes away is not an event.
		_, err := fake.SendRaw([]byte(acpitest.PowerButtonInputLine))
		require.NoError(t, err)
		fake.Stop()
		logs.waitForWith(t, logFailing, "acpi: acpid closed the connection", i)
		st := n.Status()[0]
		assert.Equal(t, termsig.StateRunning, st.State)
		assert.ErrorContains(t, st.Err, "acpid")

		require.NoError(t, fake.Start())
		require.NoError(t, fake.WaitAccepted(ctx, i+1))
		logs.waitFor(t, logHealthy, i)
		assert.NoError(t, n.Status()[0].Err)

		send(t, fake, acpitest.PowerButtonLine)
		nt := recv(t, n.C())
		assert.Equal(t, acpitest.PowerButtonLine, nt.Raw, "reconnection %d", i)
	}
	// acpid gone, then refusing while it restarts: two failures an outage,
	// however many attempts.
	assert.Equal(t, 3, logs.countWith(logFailing, "acpi: acpid closed the connection"), "one line per change, not per attempt")
	assert.LessOrEqual(t, logs.count(logFailing), 6)
	assert.Equal(t, 3, logs.count(logHealthy))
	assert.Zero(t, logs.count("acpi: transport failed, retrying")+logs.count("acpi: transport recovered"), "health is the Notifier's to log")
}

func TestAcpidNotListeningYetIsRetried(t *testing.T) {
	// acpid died and left its socket behind: the socket is there, so the
	// transport is used, and Watch keeps trying until acpid is back.
	fake := newAcpid(t)
	fake.Stop()
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: fake.Path(), Net: "unix"})
	require.NoError(t, err)
	stale.SetUnlinkOnClose(false)
	require.NoError(t, stale.Close())

	logs := newLogRecorder()
	src := acpi.New(acpi.Tune(
		acpi.Config{Transports: acpi.Acpid, AcpidSocket: fake.Path(), Logger: logs.logger()},
		acpi.Tuning{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
	))
	assert.NoError(t, src.Available())
	n := start(t, logs, src)
	logs.waitFor(t, logFailing, 1)
	assert.ErrorIs(t, n.Status()[0].Err, syscall.ECONNREFUSED)

	require.NoError(t, os.Remove(fake.Path()))
	require.NoError(t, fake.Start())
	require.NoError(t, fake.WaitClients(ctxWait(t), 1))
	logs.waitFor(t, logHealthy, 1)
	_, err = fake.PressPowerButton()
	require.NoError(t, err)
	assert.Equal(t, acpitest.PowerButtonInputLine, recv(t, n.C()).Raw)
	// Refused however many times, then (while the test swaps the socket)
	// perhaps missing for a moment: a line for each, not for each attempt.
	assert.Equal(t, 1, logs.countWith(logFailing, "connection refused"), "one line, however many attempts")
}

// Input devices

func TestInputPowerButton(t *testing.T) {
	in := newInput(t)
	power, err := in.AddDevice("Power Button", acpitest.KeyPower)
	require.NoError(t, err)
	_, err = in.AddDevice("Sleep Button", acpitest.KeySleep)
	require.NoError(t, err)
	kbd, err := in.AddDevice("AT Translated Set 2 keyboard", acpitest.KeyA, acpitest.KeySleep)
	require.NoError(t, err)
	// A node without sysfs entries is skipped.
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(power.Path()), "event99"), nil, 0o600))

	logs := newLogRecorder()
	src := acpi.New(acpi.Config{Transports: acpi.Input, InputDevices: in.Devices(), Root: in.Root(), Logger: logs.logger()})
	assert.NoError(t, src.Available())
	n := start(t, logs, src)
	r := logs.waitFor(t, "acpi: reading input device", 1)
	assert.Equal(t, power.Path(), attr(r, "path"))
	assert.Equal(t, "Power Button", attr(r, "name"))

	now := time.Now()
	var noise []byte
	for _, e := range [][]byte{
		acpitest.InputEvent(now, acpitest.EvKey, acpitest.KeyPower, 0), // release
		acpitest.InputEvent(now, acpitest.EvKey, acpitest.KeyPower, 2), // autorepeat
		acpitest.InputEvent(now, acpitest.EvKey, acpitest.KeySleep, 1),
		acpitest.InputEvent(now, acpitest.EvKey, acpitest.KeyA, 1),
		acpitest.InputEvent(now, acpitest.EvSyn, 0, 0),
		acpitest.InputEvent(now, 4, 4, acpitest.KeyPower), // EV_MSC MSC_SCAN
	} {
		noise = append(noise, e...)
	}
	_, err = power.Write(noise)
	require.NoError(t, err)
	// A press written in two parts.
	press := acpitest.InputEvent(now, acpitest.EvKey, acpitest.KeyPower, 1)
	_, err = power.Write(press[:10])
	require.NoError(t, err)
	_, err = power.Write(press[10:])
	require.NoError(t, err)

	nt := recv(t, n.C())
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Equal(t, "power-button", nt.Event)
	assert.Equal(t, "power button "+power.Path()+" (input)", nt.Reason)
	assert.Equal(t, hex.EncodeToString(press), nt.Raw, "the first notice is the press")

	// The keyboard without KEY_POWER is not read.
	_, err = kbd.Write(acpitest.InputEvent(now, acpitest.EvKey, acpitest.KeyPower, 1))
	require.NoError(t, err)
	assert.Equal(t, 1, logs.count("acpi: reading input device"))
}

func TestInputRecordingEndsTheSource(t *testing.T) {
	in := newInput(t)
	_, err := in.AddRecording("Power Button", acpitest.PowerPress(time.Now()), acpitest.KeyPower)
	require.NoError(t, err)
	logs := newLogRecorder()
	src := acpi.New(acpi.Config{Transports: acpi.Input, InputDevices: in.Devices(), Root: in.Root(), Logger: logs.logger()})
	n := start(t, logs, src)

	nt := recv(t, n.C())
	assert.Contains(t, nt.Reason, "(input)")
	logs.waitFor(t, "termsig: source failed", 1)
	n.Stop() // the Notifier logs before it updates Status: Stop makes it final
	st := n.Status()[0]
	assert.Equal(t, termsig.StateFailed, st.State)
	assert.ErrorContains(t, st.Err, "every transport has ended")
	assert.NotErrorIs(t, st.Err, termsig.ErrUnavailable)
}

func TestInputDeviceGoneOthersGoOn(t *testing.T) {
	in := newInput(t)
	a, err := in.AddDevice("Power Button", acpitest.KeyPower)
	require.NoError(t, err)
	b, err := in.AddDevice("Power Button", acpitest.KeyPower)
	require.NoError(t, err)
	logs := newLogRecorder()
	src := acpi.New(acpi.Config{Transports: acpi.Input, InputDevices: in.Devices(), Root: in.Root(), Logger: logs.logger()})
	n := start(t, logs, src)
	logs.waitFor(t, "acpi: reading input device", 2)

	require.NoError(t, a.Close())
	gone := logs.waitFor(t, "acpi: input device gone", 1)
	assert.Equal(t, a.Path(), attr(gone, "path"))
	require.NoError(t, b.PressPowerButton())
	assert.Equal(t, "power button "+b.Path()+" (input)", recv(t, n.C()).Reason)
	assert.Equal(t, termsig.StateRunning, n.Status()[0].State)
}

// Several transports

func TestOnePressOnSeveralTransportsIsOneNotice(t *testing.T) {
	fake := newAcpid(t)
	in := newInput(t)
	dev, err := in.AddDevice("Power Button", acpitest.KeyPower)
	require.NoError(t, err)
	logs := newLogRecorder()
	src := acpi.New(acpi.Config{
		Transports:  acpi.Acpid | acpi.Input,
		AcpidSocket: fake.Path(), InputDevices: in.Devices(), Root: in.Root(),
		Logger: logs.logger(),
	})
	assert.NoError(t, src.Available())
	n := start(t, logs, src)
	r := logs.waitFor(t, "acpi: watching the power button", 1)
	assert.Equal(t, "acpid+input", attr(r, "transports"))
	require.NoError(t, fake.WaitClients(ctxWait(t), 1))

	// As on a real host: the input device, then acpid's two lines.
	require.NoError(t, dev.PressPowerButton())
	_, err = fake.PressPowerButton()
	require.NoError(t, err)

	recv(t, n.C())
	logs.waitFor(t, "acpi: same press again, dropped", 2)
	noNotice(t, n.C())
	assert.Equal(t, 1, n.Status()[0].Notices)
}

func TestDedupeOffGivesEveryReport(t *testing.T) {
	fake := newAcpid(t)
	in := newInput(t)
	dev, err := in.AddDevice("Power Button", acpitest.KeyPower)
	require.NoError(t, err)
	src := acpi.New(acpi.Tune(acpi.Config{
		Transports:  acpi.Acpid | acpi.Input,
		AcpidSocket: fake.Path(), InputDevices: in.Devices(), Root: in.Root(),
	}, acpi.Tuning{DedupeWindow: -1}))
	n := start(t, newLogRecorder(), src)
	require.NoError(t, fake.WaitClients(ctxWait(t), 1))
	require.NoError(t, dev.PressPowerButton())
	_, err = fake.PressPowerButton()
	require.NoError(t, err)
	seen := map[string]int{}
	for range 3 {
		nt := recv(t, n.C())
		seen[nt.Reason[len(nt.Reason)-7:]]++
	}
	assert.Equal(t, map[string]int{"(input)": 1, "(acpid)": 2}, seen)
}

func TestOneSourceSeveralNotifiers(t *testing.T) {
	fake := newAcpid(t)
	src := acpi.New(acpi.Config{Transports: acpi.Acpid, AcpidSocket: fake.Path()})
	n1 := start(t, newLogRecorder(), src)
	n2 := start(t, newLogRecorder(), src)
	require.NoError(t, fake.WaitClients(ctxWait(t), 2))
	_, err := fake.PressPowerButton()
	require.NoError(t, err)
	assert.Equal(t, acpitest.PowerButtonInputLine, recv(t, n1.C()).Raw)
	assert.Equal(t, acpitest.PowerButtonInputLine, recv(t, n2.C()).Raw)
}

// Availability

// The places a Config leaves empty are looked for, and a transport that is
// not there is not used; with none there, the source is unavailable, not
// failed.
func TestUnavailable(t *testing.T) {
	bare := t.TempDir() // a host laid out like "/", with nothing in it
	stale := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(stale, "var/run"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(stale, "var/run/acpid.socket"), nil, 0o600))
	noKey := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(noKey, "event0"), nil, 0o600)) // no sysfs entries
	for _, tc := range []struct {
		name string
		cfg  acpi.Config
	}{
		{"nothing there", acpi.Config{Root: bare}},
		{"default socket not a socket", acpi.Config{Root: stale}},
		{"set socket of a transport not selected", acpi.Config{Root: bare, Transports: acpi.Input, AcpidSocket: filepath.Join(bare, "none")}},
		{"set glob of a transport not selected", acpi.Config{Root: bare, Transports: acpi.Acpid, InputDevices: "["}},
		{"devices without KEY_POWER", acpi.Config{Root: bare, Transports: acpi.Input, InputDevices: filepath.Join(noKey, "event*")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if cfg.Transports == 0 {
				// The kernel here may well have the netlink family: leave it out.
				cfg.Transports = acpi.Acpid | acpi.Input
			}
			src := acpi.New(cfg)
			assert.ErrorIs(t, src.Available(), termsig.ErrUnavailable)
			timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
				took, err := watchOnce(t, src)
				assert.ErrorIs(t, err, termsig.ErrUnavailable)
				return took
			})

			logs := newLogRecorder()
			n := termsig.Config{Logger: logs.logger()}.New(src)
			logs.waitFor(t, "termsig: source unavailable", 1)
			n.Stop()
			assert.Equal(t, termsig.StateUnavailable, n.Status()[0].State)
		})
	}
}

// A Config that cannot work fails Watch at once, and shows as a failed
// source; Available returns the same error, not ErrUnavailable, so that
// sources.Detect keeps it and the failure shows.
func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "acpid.socket")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	none := filepath.Join(dir, "none")
	for _, tc := range []struct {
		name string
		cfg  acpi.Config
		want string
	}{
		{"unknown transport", acpi.Config{Transports: acpi.Acpid | 0x80}, "acpi: Config.Transports (acpid+transport(0x80)) has bits outside AllTransports"},
		{"socket missing", acpi.Config{Transports: acpi.Acpid, AcpidSocket: none}, "acpi: Config.AcpidSocket: stat " + none + ": no such file or directory"},
		{"socket missing, every transport", acpi.Config{AcpidSocket: none}, "acpi: Config.AcpidSocket: stat " + none + ": no such file or directory"},
		{"not a socket", acpi.Config{Transports: acpi.Acpid, AcpidSocket: file}, "acpi: Config.AcpidSocket: " + file + " is not a socket"},
		{"bad glob", acpi.Config{Transports: acpi.Input, InputDevices: "["}, `acpi: Config.InputDevices "[": syntax error in pattern`},
		{"glob matches nothing", acpi.Config{Transports: acpi.Input, InputDevices: filepath.Join(dir, "event*")}, `acpi: Config.InputDevices "` + filepath.Join(dir, "event*") + `" matches no file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Root = dir // nothing of the defaults there
			src := acpi.New(cfg)
			err := src.Available()
			require.EqualError(t, err, tc.want, "a source that cannot work is kept, to fail")
			assert.NotErrorIs(t, err, termsig.ErrUnavailable)

			_, err = watchOnce(t, src)
			require.EqualError(t, err, tc.want)
			assert.NotErrorIs(t, err, termsig.ErrUnavailable)

			logs := newLogRecorder()
			n := termsig.Config{Logger: logs.logger()}.New(src)
			r := logs.waitFor(t, "termsig: source failed", 1)
			assert.Equal(t, tc.want, attr(r, "err"))
			n.Stop()
			st := n.Status()[0]
			assert.Equal(t, termsig.StateFailed, st.State)
			assert.EqualError(t, st.Err, tc.want)
		})
	}
	_, err := watchOnce(t, acpi.New(acpi.Config{Transports: acpi.Acpid, AcpidSocket: none}))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = watchOnce(t, acpi.New(acpi.Config{Transports: acpi.Input, InputDevices: "["}))
	assert.ErrorIs(t, err, filepath.ErrBadPattern)
}

func TestInputDeviceWithoutPowerKeyIsUnavailable(t *testing.T) {
	in := newInput(t)
	_, err := in.AddDevice("keyboard", acpitest.KeyA)
	require.NoError(t, err)
	_, err = in.AddDevice("broken", acpitest.KeyPower)
	require.NoError(t, err)
	// Break the second device's bitmap.
	require.NoError(t, os.WriteFile(filepath.Join(in.Root(), "sys/class/input/event1/device/capabilities/key"), []byte("zz\n"), 0o644))
	logs := newLogRecorder()
	src := acpi.New(acpi.Config{Transports: acpi.Input, InputDevices: in.Devices(), Root: in.Root(), Logger: logs.logger()})
	assert.ErrorIs(t, src.Available(), termsig.ErrUnavailable)
	assert.Equal(t, 2, logs.count("acpi: input device skipped"))
}

// Netlink, for real

// netlinkFamily resolves the acpi_event family the way a user would,
// independently of the source; it skips the test where the kernel has
// none (no ACPI, or a network namespace of its own).
func netlinkFamily(t *testing.T) genetlink.Family {
	t.Helper()
	c, err := genetlink.Dial(nil)
	require.NoError(t, err)
	defer c.Close()
	fam, err := c.GetFamily(acpitest.GenlFamily)
	if err != nil {
		t.Skipf("no %s netlink family here: %v", acpitest.GenlFamily, err)
	}
	return fam
}

func TestNetlinkSubscribesForReal(t *testing.T) {
	netlinkFamily(t)
	timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
		logs := newLogRecorder()
		src := acpi.New(acpi.Config{Transports: acpi.Netlink, Logger: logs.logger()})
		assert.NoError(t, src.Available())
		n := start(t, logs, src)
		r := logs.waitFor(t, "acpi: watching the power button", 1)
		assert.Equal(t, "netlink", attr(r, "transports"))
		r = logs.waitFor(t, "acpi: netlink subscribed", 1)
		assert.NotEqual(t, "0", attr(r, "port"))

		start := time.Now()
		n.Stop()
		took := time.Since(start)
		assert.Equal(t, termsig.StateStopped, n.Status()[0].State)
		return took
	})
}

// TestNetlinkEndToEnd sends acpi_event messages to the source's own netlink
// socket (unicast, so that no other listener on the host, such as acpid,
// sees a forged power-button press) and checks the notice.
func TestNetlinkEndToEnd(t *testing.T) {
	fam := netlinkFamily(t)
	logs := newLogRecorder()
	src := acpi.New(acpi.Tune(acpi.Config{Transports: acpi.Netlink, Logger: logs.logger()}, acpi.Tuning{DedupeWindow: -1}))
	n := start(t, logs, src)
	port, err := strconv.ParseUint(attr(logs.waitFor(t, "acpi: netlink subscribed", 1), "port"), 10, 32)
	require.NoError(t, err)

	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}))
	sendMsg := func(family uint16, genl []byte) {
		t.Helper()
		err := unix.Sendto(fd, acpitest.NetlinkMessage(family, genl), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: uint32(port)})
		if errors.Is(err, unix.EPERM) {
			t.Skip("sending to another netlink socket needs CAP_NET_ADMIN")
		}
		require.NoError(t, err)
	}

	sendMsg(fam.ID, acpitest.GenlMessage(acpitest.GenlEvent("button/lid", "PNP0C0D:00", 0x80, 1)))
	sendMsg(fam.ID, acpitest.GenlMessage(acpitest.GenlEvent("ac_adapter", "ACPI0003:00", 0x80, 0)))
	sendMsg(fam.ID, []byte{2, 1, 0, 0})                                          // another command
	sendMsg(fam.ID+1, acpitest.GenlMessage(acpitest.PowerButtonGenlEvent(1)))    // another family
	sendMsg(fam.ID, acpitest.GenlMessage(acpitest.PowerButtonGenlEvent(1)[:40])) // short event
	sendMsg(fam.ID, acpitest.GenlMessage(acpitest.PowerButtonGenlEvent(2)))

	nt := recv(t, n.C())
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Equal(t, "power-button", nt.Event)
	assert.Equal(t, "power button LNXPWRBN:00 (netlink)", nt.Reason)
	assert.Equal(t, "button/power LNXPWRBN:00 00000080 00000002", nt.Raw, "the first notice is the press")
	assert.Equal(t, 4, logs.count("acpi: event ignored"))
}

// Stop

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

func TestStopIsPromptAndLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, fake *acpitest.Acpid, dev *acpitest.InputDevice, logs *logRecorder)
	}{
		{"reading", func(*testing.T, *acpitest.Acpid, *acpitest.InputDevice, *logRecorder) {}},
		{"waiting to reconnect", func(t *testing.T, fake *acpitest.Acpid, _ *acpitest.InputDevice, logs *logRecorder) {
			fake.Stop()
			logs.waitFor(t, logFailing, 1)
		}},
		{"consumer not reading", func(t *testing.T, _ *acpitest.Acpid, dev *acpitest.InputDevice, logs *logRecorder) {
			for range 5 {
				require.NoError(t, dev.PressPowerButton())
			}
			logs.waitFor(t, "acpi: power button pressed", 2) // C (1) is full: the second waits in Send
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timing.Within(t, 100*time.Millisecond, 3, func() time.Duration { return stopPromptly(t, tc.setup) })
		})
	}
}

// stopPromptly runs all three transports, puts the source in the state
// setup makes, and returns how long Stop took; it checks that Stop leaves
// no socket or file open.
func stopPromptly(t *testing.T, setup func(*testing.T, *acpitest.Acpid, *acpitest.InputDevice, *logRecorder)) time.Duration {
	fds := openFDs(t)
	fake := newAcpid(t)
	in := newInput(t)
	dev, err := in.AddDevice("Power Button", acpitest.KeyPower)
	require.NoError(t, err)
	logs := newLogRecorder()
	src := acpi.New(acpi.Tune(acpi.Config{
		AcpidSocket: fake.Path(), InputDevices: in.Devices(), Root: in.Root(), Logger: logs.logger(),
	}, acpi.Tuning{Backoff: time.Hour, DedupeWindow: -1}))
	n := termsig.Config{Logger: logs.logger(), Buffer: 1}.New(src)
	require.NoError(t, fake.WaitClients(ctxWait(t), 1))
	logs.waitFor(t, "acpi: reading input device", 1)
	setup(t, fake, dev, logs)

	start := time.Now()
	n.Stop()
	took := time.Since(start)
	assert.Equal(t, termsig.StateStopped, n.Status()[0].State)

	require.NoError(t, fake.WaitClients(ctxWait(t), 0))
	fake.Close()
	in.Close()
	assert.Equal(t, fds, openFDs(t), "every socket and file is closed")
	return took
}

// Watch returns ctx's error whenever ctx ends: before it has connected, or
// after. (TestTransportsEndingAtStopIsAStop forces the race that this
// only samples.)
func TestStopEndsWatchWithCtxError(t *testing.T) {
	fake := newAcpid(t)
	in := newInput(t)
	_, err := in.AddDevice("Power Button", acpitest.KeyPower)
	require.NoError(t, err)
	src := acpi.New(acpi.Config{AcpidSocket: fake.Path(), InputDevices: in.Devices(), Root: in.Root(), Logger: slog.New(slog.DiscardHandler)})
	for i := range 200 {
		// In odd trials ctx is done when Watch starts: the transports end
		// at once, racing Watch's own look at ctx.
		w := newWatched(src, i%2 == 1)
		n := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(w)
		if i%2 == 0 {
			require.NoError(t, fake.WaitClients(ctxWait(t), 1))
		}
		n.Stop()
		require.ErrorIs(t, recv(t, w.ret).err, context.Canceled, "trial %d", i)
		require.NoError(t, fake.WaitClients(ctxWait(t), 0))
	}
}

// Ready

// pending reports whether a connection waits to be accepted on ln, without
// waiting for one.
func pending(t *testing.T, ln *net.UnixListener) bool {
	t.Helper()
	rc, err := ln.SyscallConn()
	require.NoError(t, err)
	var (
		nfd  int
		aerr error
	)
	require.NoError(t, rc.Control(func(fd uintptr) {
		// The listener is non-blocking: EAGAIN when nobody has connected.
		nfd, _, aerr = unix.Accept4(int(fd), unix.SOCK_CLOEXEC)
	}))
	if aerr != nil {
		require.ErrorIs(t, aerr, unix.EAGAIN)
		return false
	}
	unix.Close(nfd)
	return true
}

// termsig.New returns once every transport has made its first attempt:
// acpid's connection is made, or has failed and says so in Status.
func TestReadyAfterFirstAttempts(t *testing.T) {
	t.Run("acpid listening", func(t *testing.T) {
		// A bare listener that does not accept: a connection made is
		// pending on it, and nothing else tells the source it is there.
		path := filepath.Join(t.TempDir(), "acpid.socket")
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		require.NoError(t, err)
		defer ln.Close()
		src := acpi.New(acpi.Config{Transports: acpi.Acpid, AcpidSocket: path})
		n := start(t, newLogRecorder(), src)
		assert.True(t, pending(t, ln), "connected to acpid before New returned")
		recv(t, n.Ready())
	})
	t.Run("acpid refusing", func(t *testing.T) {
		fake := newAcpid(t)
		fake.Stop()
		stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: fake.Path(), Net: "unix"})
		require.NoError(t, err)
		stale.SetUnlinkOnClose(false)
		require.NoError(t, stale.Close())
		src := acpi.New(acpi.Tune(acpi.Config{Transports: acpi.Acpid, AcpidSocket: fake.Path()}, acpi.Tuning{Backoff: time.Hour}))
		n := start(t, newLogRecorder(), src)
		assert.ErrorIs(t, n.Status()[0].Err, syscall.ECONNREFUSED, "the first attempt failed before New returned")
		recv(t, n.Ready())
	})
	t.Run("input", func(t *testing.T) {
		in := newInput(t)
		_, err := in.AddDevice("Power Button", acpitest.KeyPower)
		require.NoError(t, err)
		src := acpi.New(acpi.Config{Transports: acpi.Input, InputDevices: in.Devices(), Root: in.Root()})
		n := start(t, newLogRecorder(), src)
		select {
		case <-n.Ready():
		default:
			t.Fatal("not ready when New returned")
		}
	})
}

// Logging

func TestNilLoggerIsSlogDefault(t *testing.T) {
	logs := newLogRecorder()
	old := slog.Default()
	slog.SetDefault(logs.logger())
	t.Cleanup(func() { slog.SetDefault(old) })

	fake := newAcpid(t)
	start(t, newLogRecorder(), acpi.New(acpi.Config{Transports: acpi.Acpid, AcpidSocket: fake.Path()}))
	r := logs.waitFor(t, "acpi: watching the power button", 1)
	assert.Equal(t, "acpid", attr(r, "transports"))
}
