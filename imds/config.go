package imds

import (
	"fmt"
	"net/url"
	"time"

	"github.com/termsig/termsig/internal/host"
)

// validate returns what makes c unable to work, or nil. It checks c as
// given to New (zero still means the default), and the endpoint that the
// SDK would take from the environment (in.IMDSEndpoint) when c does not
// name one. Every error starts "imds: " and names the field, so that the
// one line the Notifier logs says what to fix.
func (c Config) validate(in host.Info) error {
	if c.Endpoint != "" {
		if err := checkEndpoint("Config.Endpoint", c.Endpoint); err != nil {
			return err
		}
	} else if c.Client == nil && !in.IMDSDisabled && in.IMDSEndpoint != "" {
		if err := checkEndpoint("AWS_EC2_METADATA_SERVICE_ENDPOINT", in.IMDSEndpoint); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		name  string
		value time.Duration
		floor time.Duration
	}{
		{"Interval", c.Interval, MinInterval},
		{"AdvisoryInterval", c.AdvisoryInterval, MinInterval},
		{"Timeout", c.Timeout, 0},
		{"MaxBackoff", c.MaxBackoff, 0},
	} {
		switch {
		case d.value < 0:
			return fmt.Errorf("imds: Config.%s is negative (%v)", d.name, d.value)
		case d.value > 0 && d.value < d.floor:
			return fmt.Errorf("imds: Config.%s %v is below MinInterval (%v): it would hammer the metadata service", d.name, d.value, d.floor)
		}
	}
	switch {
	case c.Events != 0 && c.Events&AllEvents == 0:
		return fmt.Errorf("imds: Config.Events %#x selects no known event (AllEvents is %#x)", uint8(c.Events), uint8(AllEvents))
	case c.Events&^AllEvents != 0:
		return fmt.Errorf("imds: Config.Events %#x has bits outside AllEvents (%#x)", uint8(c.Events), uint8(AllEvents))
	}
	return nil
}

// checkEndpoint returns an error naming what if v is not an absolute http
// or https URL with a host, which is what the SDK needs to make requests
// (it would otherwise fail every poll, or poll a relative path).
func checkEndpoint(what, v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return fmt.Errorf("imds: %s %q is not an absolute http or https URL with a host", what, v)
	}
	return nil
}
