package imds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsimds "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/termsig/termsig/internal/httpguard"
)

// client returns the SDK client of one Watch, and a function that closes
// the idle connections of the Source's own transport when Watch returns.
func (c *Config) client() (*awsimds.Client, func()) {
	hc, release := c.HTTPClient, func() {}
	if hc == nil {
		// No proxy (IMDS is link-local), a short dial timeout as the SDK
		// uses, and keep-alive so that polling once a second reuses a
		// connection, one for each path polled at once.
		tr := httpguard.NewTransport(250*time.Millisecond, 4, c.dnsDial)
		hc, release = &http.Client{Transport: tr}, tr.CloseIdleConnections
	}
	guarded, unguard := httpguard.Guard(hc, maxBody)
	opts := awsimds.Options{
		Endpoint: c.Endpoint,
		// The SDK reads each answer whole before the source sees it:
		// only the transport can cut one off, the token's included.
		HTTPClient:               guarded,
		Retryer:                  newRetryer(),
		DisableDefaultMaxBackoff: true,
	}
	if c.Endpoint != "" {
		// An endpoint given in Config is a request to use it, as
		// Available says: AWS_EC2_METADATA_DISABLED, which would
		// otherwise make the SDK refuse every request, does not apply.
		opts.ClientEnableState = awsimds.ClientEnabled
	}
	return awsimds.New(opts), func() { unguard(); release() }
}

// newRetryer returns the SDK retryer of a Source's own client. It tries a
// request again in one case only, at once: a 401, after which the SDK
// fetches a fresh token (IMDS forgot the old one, as when it restarts).
// Every other failure (429, 5xx, a connection refused, a timeout, an
// answer the transport refused) ends the poll, and the source's own
// backoff between polls decides when to ask again: a second layer of
// retries would double the requests to a throttled IMDS and delay the
// answer of a fast poll. Nor is there a retry quota, which a long outage
// would drain for good.
func newRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = 2
		o.RateLimiter = ratelimit.None
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		o.Retryables = []retry.IsErrorRetryable{
			retry.IsErrorRetryableFunc(refused),
			retry.NoRetryCanceledError{},
			retry.RetryableError{}, // what the SDK marks retryable: a 401
		}
	})
}

// refused says that an error of the guarded transport is not to be retried,
// and leaves other errors to the SDK's rules.
func refused(err error) aws.Ternary {
	var ge *httpguard.Error
	if errors.As(err, &ge) {
		return aws.FalseTernary
	}
	return aws.UnknownTernary
}

// describe says what went wrong in a few stable words. The Notifier logs
// each new text, and the SDK's messages carry the request's URL (so its
// path) and attempt counts: one outage must read the same on every poll
// of every path, or it would be logged again and again.
func describe(err error, timeout time.Duration) string {
	var re *smithyhttp.ResponseError
	var ne net.Error
	var ge *httpguard.Error
	switch {
	case errors.As(err, &ge):
		return ge.Error()
	case errors.As(err, &re):
		return fmt.Sprintf("HTTP %d", re.HTTPStatusCode())
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("no answer within %v", timeout)
	case errors.As(err, &ne):
		return "unreachable: " + cause(err)
	}
	return cause(err)
}

// cause returns the innermost reason for err, without the URL, address or
// operation that wrap it: "connection refused", "DNS lookup of
// imds.example failed: no such host", "EOF".
func cause(err error) string {
	var dns *net.DNSError
	var errno syscall.Errno
	switch {
	case errors.As(err, &dns):
		return "DNS lookup of " + dns.Name + " failed: " + dns.Err
	case errors.As(err, &errno):
		return errno.Error()
	}
	for {
		inner := errors.Unwrap(err)
		if inner == nil {
			return err.Error()
		}
		err = inner
	}
}

// pathError is a failed poll of one path. Error is short and stable, and
// names the path only when the failure is the path's own (a bad payload),
// so that IMDS being down reads the same whichever path saw it first;
// Unwrap gives the cause.
type pathError struct {
	path, msg string
	err       error
}

func (e *pathError) Error() string { return "imds: " + e.msg }
func (e *pathError) Unwrap() error { return e.err }
