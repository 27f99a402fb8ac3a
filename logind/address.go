package logind

import (
	"fmt"
	"net"
	"strings"

	"github.com/godbus/dbus/v5"
)

// An endpoint is one entry of a D-Bus address that the source can dial.
type endpoint struct {
	network, addr string // for net.Dial
	path          string // of a unix:path= entry; "" for the others
}

// parseAddress parses a D-Bus address list, such as
// "unix:path=/run/dbus/system_bus_socket" or
// "unix:path=/a;tcp:host=h,port=1". It knows unix:path=, unix:abstract=
// and tcp:host=,port=; another transport is an error, as is an entry that
// is not transport:key=value,….
func parseAddress(address string) ([]endpoint, error) {
	var eps []endpoint
	for entry := range strings.SplitSeq(address, ";") {
		if entry == "" {
			continue
		}
		ep, err := parseEntry(entry)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", address, err)
		}
		eps = append(eps, ep)
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("%q names no bus", address)
	}
	return eps, nil
}

func parseEntry(entry string) (endpoint, error) {
	transport, kvs, ok := strings.Cut(entry, ":")
	if !ok || transport == "" {
		return endpoint{}, fmt.Errorf("%q is not a D-Bus address (transport:key=value,...)", entry)
	}
	keys := map[string]string{}
	for kv := range strings.SplitSeq(kvs, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return endpoint{}, fmt.Errorf("%q is not a D-Bus address: %q is not key=value", entry, kv)
		}
		v, err := dbus.UnescapeBusAddressValue(v)
		if err != nil {
			return endpoint{}, fmt.Errorf("%q is not a D-Bus address: %w", entry, err)
		}
		keys[k] = v
	}
	switch {
	case transport == "unix" && keys["path"] != "":
		return endpoint{network: "unix", addr: keys["path"], path: keys["path"]}, nil
	case transport == "unix" && keys["abstract"] != "":
		return endpoint{network: "unix", addr: "@" + keys["abstract"]}, nil
	case transport == "tcp" && keys["host"] != "" && keys["port"] != "":
		return endpoint{network: "tcp", addr: net.JoinHostPort(keys["host"], keys["port"])}, nil
	}
	return endpoint{}, fmt.Errorf("%q: only unix:path=, unix:abstract= and tcp:host=,port= are supported", entry)
}
