//go:build linux

package main

import (
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRunnerAlive(t *testing.T) {
	env := func(pid int) []byte {
		return []byte("PATH=/bin\x00" + jobRunnerEnv + "=" + strconv.Itoa(pid) + "\x00X=1")
	}
	assert.True(t, runnerAlive(env(os.Getppid())), "another live process")
	assert.False(t, runnerAlive(env(os.Getpid())), "this process started no job yet")
	assert.False(t, runnerAlive(env(1<<22+12345)), "no such process")
	assert.False(t, runnerAlive([]byte("PATH=/bin")), "no pid: an older runner, gone")
	assert.False(t, runnerAlive([]byte(jobRunnerEnv+"=x")), "garbage")
}
