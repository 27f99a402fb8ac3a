package asgtest_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig/asg/asgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	wait   = 5 * time.Second
	region = "eu-west-1"
	iid    = "i-0123456789abcdef0"
	// sigv4 is an Authorization header of the SigV4 scheme, for raw
	// requests; the fake does not check the signature.
	sigv4 = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261130/" + region + "/autoscaling/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=0123"
)

// client returns an SDK client of srv that does not retry, with its own
// connections, closed when the test ends.
func client(t testing.TB, srv *asgtest.Server, opts ...func(*autoscaling.Options)) *autoscaling.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := aws.Config{
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""),
		HTTPClient:  &http.Client{Transport: tr},
	}
	return autoscaling.NewFromConfig(cfg, append([]func(*autoscaling.Options){func(o *autoscaling.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		o.RetryMaxAttempts = 1
	}}, opts...)...)
}

// ctx returns a context that ends when the test does or after wait.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(t.Context(), wait)
	t.Cleanup(cancel)
	return c
}

// apiError returns the API error of err, its HTTP status and its request
// id, failing the test if err is not one.
func apiError(t testing.TB, err error) (smithy.APIError, int, string) {
	t.Helper()
	var ae smithy.APIError
	require.ErrorAs(t, err, &ae)
	var re *awshttp.ResponseError
	require.ErrorAs(t, err, &re)
	return ae, re.HTTPStatusCode(), re.ServiceRequestID()
}

type reply struct {
	status int
	header http.Header
	body   string
}

// post sends form to srv as the query protocol does, with the
// Authorization header auth ("" for none).
func post(t testing.TB, srv *asgtest.Server, form, auth string) reply {
	t.Helper()
	return postBody(t, srv, strings.NewReader(form), auth)
}

func postBody(t testing.TB, srv *asgtest.Server, body io.Reader, auth string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, srv.URL+"/", body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return reply{res.StatusCode, res.Header, string(b)}
}

// newServer returns a server with group "web" and its hooks, and
// instance iid in it, closed when the test ends.
func newServer(t testing.TB, hooks ...asgtest.Hook) *asgtest.Server {
	srv := asgtest.NewServer()
	t.Cleanup(srv.Close)
	srv.AddGroup("web", hooks...)
	srv.AddInstance(iid, "web")
	return srv
}

// calls returns the Actions and error codes of srv's log.
func calls(srv *asgtest.Server) []string {
	var out []string
	for _, c := range srv.Calls() {
		s := c.Action
		if c.Err != "" {
			s += " " + c.Err
		}
		out = append(out, s)
	}
	return out
}
