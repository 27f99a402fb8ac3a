package main

import (
	"context"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain is also the fake IMDS process, or a reference, when the bench
// under test starts the test binary again with serveEnv or referenceEnv
// set, as the command starts itself.
func TestMain(m *testing.M) {
	if name := os.Getenv(referenceEnv); name != "" {
		if err := runReference(name); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(serveEnv) != "" {
		if err := serveIMDS(os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestRun runs the whole benchmark with two trials per row, short windows
// and fast SDK pollers, and checks that the table has every row with its
// figures. It takes about ten seconds, most of them termsig's 1 s polling.
func TestRun(t *testing.T) {
	o := options{trials: 2, lane: time.Second, handler: 100 * time.Millisecond, advised: 200 * time.Millisecond,
		spin: time.Second, idle: time.Second, warmup: 500 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out strings.Builder
	require.NoError(t, run(ctx, o, &out))
	table := out.String()
	t.Log("\n" + table)

	for _, c := range imdsClients(o) {
		assert.Contains(t, table, "| "+c.name+" | 2 | ", "IMDS latency row")
		assert.Equal(t, 2, strings.Count(table, "| "+c.name+" | "), "IMDS latency and idle rows of %s", c.name)
	}
	for _, name := range gceNames {
		assert.Equal(t, 2, strings.Count(table, "| "+name+" | 2 | "), "GCE latency rows of %s", name)
		assert.Equal(t, 4, strings.Count(table, "| "+name+" | "), "GCE latency and rate rows of %s", name)
	}
	if runtime.GOOS == "linux" {
		assert.Contains(t, table, "CPU-s/hour")
		assert.Contains(t, table, "examples/notices at idle (watching signal imds", "the sources notify watches")
		for _, r := range references {
			assert.Contains(t, table, r.desc)
		}
	} else {
		assert.Contains(t, table, errNoProc.Error())
	}
}

// -quick sets the quick defaults; flags set alongside it win.
func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want options
	}{
		{"full", nil, fullRun},
		{"quick", []string{"-quick"}, withQuick(quickRun)},
		{"quick with trials", []string{"-trials", "7", "-quick"}, func() options {
			o := withQuick(quickRun)
			o.trials = 7
			return o
		}()},
		{"full with notify", []string{"-notify", "/bin/notify"}, func() options {
			o := fullRun
			o.notify = "/bin/notify"
			return o
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags("bench", tc.args, io.Discard)
			require.NoError(t, err)
			assert.Equal(t, tc.want, o)
		})
	}
	_, err := parseFlags("bench", []string{"extra"}, io.Discard)
	assert.Error(t, err, "arguments")
}

// withQuick returns o with quick set.
func withQuick(o options) options {
	o.quick = true
	return o
}
