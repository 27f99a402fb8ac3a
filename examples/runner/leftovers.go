//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// jobEnv marks every process of a job with the name of the runner that
// started it, so that a runner can find the jobs of a predecessor that was
// killed (SIGKILL, OOM) before it could stop them. Pdeathsig kills the
// job's shell with its runner, but not what the shell started.
const jobEnv = "TERMSIG_RUNNER_JOB"

// killLeftovers kills the process groups of jobs left running by an
// earlier runner of the same name on this host, so that they do not race
// the re-run of the same jobs, and returns the groups it killed. It waits
// up to two seconds for them to end.
func killLeftovers(name string) []int {
	mark := []byte(jobEnv + "=" + name)
	groups := map[int]bool{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil || !hasEntry(env, mark) {
			continue
		}
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid > 1 {
			groups[pgid] = true
		}
	}
	var killed []int
	for pgid := range groups {
		if syscall.Kill(-pgid, syscall.SIGKILL) == nil {
			killed = append(killed, pgid)
		}
	}
	for end := time.Now().Add(2 * time.Second); len(killed) > 0 && time.Now().Before(end); {
		if !anyAlive(killed) {
			break
		}
		time.Sleep(10 * time.Millisecond) // no way to wait for processes that are not our children
	}
	return killed
}

// hasEntry reports whether the NUL-separated environment env has entry.
func hasEntry(env, entry []byte) bool {
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(kv, entry) {
			return true
		}
	}
	return false
}

// anyAlive reports whether a process of one of the groups is still alive
// (zombies, waiting for their parent to reap them, are dead).
func anyAlive(groups []int) bool {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		pgrp, _ := strconv.Atoi(fields[2])
		for _, g := range groups {
			if pgrp == g {
				return true
			}
		}
	}
	return false
}
