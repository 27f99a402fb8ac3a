package imds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A transport error reads the same whatever the URL of the request.
func TestDescribeIsStable(t *testing.T) {
	refused := func(path string) error {
		return fmt.Errorf("operation error ec2imds: GetMetadata, exceeded maximum number of attempts, 3, %w", &url.Error{
			Op: "Get", URL: "http://127.0.0.1:1/latest/meta-data/" + path,
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)},
		})
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"refused", refused(pathInstanceAction), "unreachable: " + syscall.ECONNREFUSED.Error()},
		{"refused elsewhere", refused(pathScheduled), "unreachable: " + syscall.ECONNREFUSED.Error()},
		{"dns", &url.Error{Op: "Get", URL: "http://imds.invalid/latest/meta-data/" + pathRebalance, Err: &net.OpError{
			Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "imds.invalid", IsNotFound: true},
		}}, "unreachable: DNS lookup of imds.invalid failed: no such host"},
		{"eof", &url.Error{Op: "Get", URL: "http://x/latest/meta-data/" + pathLifecycle, Err: errors.New("EOF")}, "unreachable: EOF"},
		{"deadline", fmt.Errorf("request: %w", context.DeadlineExceeded), "no answer within 2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, describe(tc.err, 2*time.Second))
		})
	}
}

// A nil Logger is slog.Default() as it is when Watch starts.
func TestNilLoggerMeansDefault(t *testing.T) {
	assert.Same(t, slog.Default(), Config{}.withDefaults().Logger)
	own := slog.New(slog.DiscardHandler)
	assert.Same(t, own, Config{Logger: own}.withDefaults().Logger)
}
