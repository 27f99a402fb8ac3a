//go:build linux

package main

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadmeTryOutWorksAsWritten runs the two terminals of the root
// README's "Try it without a cloud" as written, but for three changes: the
// termsig built by TestMain, the fake on a free port (its ready line gives
// the address, which replaces 127.0.0.1:1338 in the second command), and
// the interruption 1 s from now instead of 20 s.
func TestReadmeTryOutWorksAsWritten(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "## Try it without a cloud\n")
	require.True(t, ok, "the README has its try-out")
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1)
	require.Len(t, blocks, 2, "one block per terminal")
	fakeCmd, superviseCmd := blocks[0][1], blocks[1][1]
	require.Contains(t, fakeCmd, "--spot-in 20s")
	fakeCmd = strings.Replace(fakeCmd, "--spot-in 20s", "--spot-in 1s --listen 127.0.0.1:0", 1)

	fake := exec.Command("sh", "-c", "exec "+strings.Replace(fakeCmd, "termsig ", termsigBin+" ", 1))
	out, err := fake.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, fake.Start())
	t.Cleanup(func() { _ = fake.Process.Kill(); _ = fake.Wait() })
	lines := bufio.NewScanner(out)
	require.True(t, lines.Scan(), "the fake's ready line")
	addr := regexp.MustCompile(`serving on http://(\S+);`).FindStringSubmatch(lines.Text())
	require.NotNil(t, addr, lines.Text())

	require.Contains(t, superviseCmd, "127.0.0.1:1338 termsig supervise")
	superviseCmd = strings.Replace(superviseCmd, "127.0.0.1:1338", addr[1], 1)
	superviseCmd = strings.Replace(superviseCmd, "termsig supervise", termsigBin+" supervise", 1)
	sup := exec.Command("sh", "-c", superviseCmd)
	sup.WaitDelay = time.Second
	done := make(chan struct{})
	var childOut []byte
	go func() {
		defer close(done)
		childOut, err = sup.Output()
	}()
	select {
	case <-done:
	case <-time.After(wait):
		_ = sup.Process.Kill()
		<-done
		t.Fatal("termsig supervise did not end after the interruption")
	}
	require.NoError(t, err, "termsig exits 0, as the child did")
	assert.Equal(t, "child: working\nchild: SIGTERM, handing my work back\nchild: done\n", string(childOut))
}
