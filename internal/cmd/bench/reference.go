package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/termsig/termsig/imds/imdstest"
)

// referenceEnv, set to the name of a reference, makes the command that
// reference program (see runReference): the bench starts itself again
// with it, beside examples/notices.
const referenceEnv = "TERMSIG_BENCH_REFERENCE"

// A reference is a program whose idle CPU is measured in the same window
// as examples/notices's, to put that figure in scale on the machine at
// hand: what a Go program costs that only wakes once a second, and what
// a plain poller of the same paths on the same schedule costs.
type reference struct {
	name, desc string
}

var references = []reference{
	{"ticker", "for scale: a Go program that wakes once a second and does nothing else"},
	{"nethttp", "for scale: a plain net/http IMDSv2 poller, same paths and schedule (spot every 1 s, lifecycle and rebalance every 3 s, scheduled every 30 s)"},
}

// referenceCommand returns the command that runs the reference named name
// against the IMDS at url.
func referenceCommand(ctx context.Context, name, url string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), referenceEnv+"="+name, "AWS_EC2_METADATA_SERVICE_ENDPOINT="+url)
	return cmd, nil
}

// runReference runs the reference named name until it is killed.
func runReference(name string) error {
	switch name {
	case "ticker":
		for range time.Tick(time.Second) {
		}
	case "nethttp":
		return netHTTPPoller(os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT"))
	}
	return fmt.Errorf("no reference %q", name)
}

// netHTTPPoller polls the IMDS at url as a plain program would: one
// goroutine, net/http's default transport, a token fetched when it has
// none or got a 401.
func netHTTPPoller(url string) error {
	c := &http.Client{Timeout: 2 * time.Second}
	token := ""
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for k := 0; ; k++ {
		paths := []string{imdstest.PathInstanceAction}
		if k%3 == 0 {
			paths = append(paths, imdstest.PathLifecycle, imdstest.PathRebalance)
		}
		if k%30 == 0 {
			paths = append(paths, imdstest.PathScheduled)
		}
		for _, p := range paths {
			if token == "" {
				token = fetchToken(c, url)
			}
			if status := getPath(c, url, token, p); status == http.StatusUnauthorized {
				token = ""
			}
		}
		<-tick.C
	}
}

// fetchToken returns an IMDSv2 token from url, or "" if it got none.
func fetchToken(c *http.Client, url string) string {
	req, err := http.NewRequest(http.MethodPut, url+"/latest/api/token", nil)
	if err != nil {
		return ""
	}
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "21600")
	res, err := c.Do(req)
	if err != nil {
		return ""
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<10))
	if err != nil || res.StatusCode != http.StatusOK {
		return ""
	}
	return string(b)
}

// getPath reads the metadata path p from url, and returns the status.
func getPath(c *http.Client, url, token, p string) int {
	req, err := http.NewRequest(http.MethodGet, url+"/latest/meta-data/"+p, nil)
	if err != nil {
		return 0
	}
	req.Header.Set("X-aws-ec2-metadata-token", token)
	res, err := c.Do(req)
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	return res.StatusCode
}
