package acpitest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// An Input is a fake input subsystem in a temporary directory laid out
// like "/": device nodes under dev/input and their sysfs entries under
// sys/class/input. Point acpi.Config.Root at [Input.Root]: the source then
// finds the devices at its default place and reads their sysfs entries
// there. (acpi.Config.InputDevices may also be set to [Input.Devices].)
//
// Its methods are safe for concurrent use. Close it when done.
type Input struct {
	dir string

	mu      sync.Mutex
	next    int
	devices []*InputDevice
}

// NewInput creates an empty fake input subsystem.
func NewInput() (*Input, error) {
	dir, err := os.MkdirTemp("", "acpitest")
	if err != nil {
		return nil, fmt.Errorf("acpitest: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "dev", "input"), 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("acpitest: %w", err)
	}
	return &Input{dir: dir}, nil
}

// Devices returns the glob of the device nodes, for acpi.Config.InputDevices.
func (in *Input) Devices() string { return filepath.Join(in.dir, "dev", "input", "event*") }

// Root returns the fake's directory, laid out like "/", for
// acpi.Config.Root: the devices are under Root/dev/input and their sysfs
// entries under Root/sys/class/input.
func (in *Input) Root() string { return in.dir }

// add creates the sysfs entries of a new device eventN and returns the
// path of its node.
func (in *Input) add(name string, keys []int) (string, error) {
	in.mu.Lock()
	node := "event" + strconv.Itoa(in.next)
	in.next++
	in.mu.Unlock()
	dev := filepath.Join(in.dir, "sys", "class", "input", node, "device")
	if err := os.MkdirAll(filepath.Join(dev, "capabilities"), 0o755); err != nil {
		return "", fmt.Errorf("acpitest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dev, "capabilities", "key"), []byte(KeyBitmap(keys...)), 0o644); err != nil {
		return "", fmt.Errorf("acpitest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dev, "name"), []byte(name+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("acpitest: %w", err)
	}
	return filepath.Join(in.dir, "dev", "input", node), nil
}

// AddDevice adds a device named name (such as "Power Button") with the
// given keys (such as KeyPower) in its capabilities. Its node is a FIFO
// that the fake holds open for writing, so that a reader blocks, as on a
// real device, until [InputDevice.Write] or a press.
func (in *Input) AddDevice(name string, keys ...int) (*InputDevice, error) {
	path, err := in.add(name, keys)
	if err != nil {
		return nil, err
	}
	if err := unix.Mkfifo(path, 0o600); err != nil {
		return nil, fmt.Errorf("acpitest: mkfifo %s: %w", path, err)
	}
	// O_RDWR opens a FIFO without waiting for a reader (Linux), and keeps a
	// writer on it, so that the reader does not see the end of the file.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("acpitest: %w", err)
	}
	d := &InputDevice{path: path, f: f}
	in.mu.Lock()
	in.devices = append(in.devices, d)
	in.mu.Unlock()
	return d, nil
}

// AddRecording adds a device whose node is a regular file holding events,
// such as PowerPress output: a reader reads them all, then reaches the end
// of the file, which the acpi source takes for the device going away.
func (in *Input) AddRecording(name string, events []byte, keys ...int) (path string, err error) {
	path, err = in.add(name, keys)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, events, 0o600); err != nil {
		return "", fmt.Errorf("acpitest: %w", err)
	}
	return path, nil
}

// Close closes every device and removes the fake's directory.
func (in *Input) Close() error {
	in.mu.Lock()
	devs := in.devices
	in.devices = nil
	in.mu.Unlock()
	errs := make([]error, 0, len(devs)+1)
	for _, d := range devs {
		errs = append(errs, d.Close())
	}
	return errors.Join(append(errs, os.RemoveAll(in.dir))...)
}

// An InputDevice is a fake input device made by [Input.AddDevice].
type InputDevice struct {
	path string
	f    *os.File
}

// Path returns the device node's path.
func (d *InputDevice) Path() string { return d.path }

// Write writes raw bytes to the device: whole struct input_event records
// (see InputEvent), or parts of one.
func (d *InputDevice) Write(b []byte) (int, error) { return d.f.Write(b) }

// PressPowerButton writes the events of one press (see PowerPress).
func (d *InputDevice) PressPowerButton() error {
	_, err := d.f.Write(PowerPress(time.Now()))
	return err
}

// Close closes the fake's end of the FIFO: the reader then reads the end
// of the file, as when a real device is unplugged. It is idempotent.
func (d *InputDevice) Close() error {
	err := d.f.Close()
	if errors.Is(err, os.ErrClosed) {
		return nil
	}
	return err
}
