//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// jobEnv and jobRunnerEnv mark every process of a job with the name and
// the pid of the runner that started it, so that a runner can find what is
// left of the jobs of a predecessor that died before it could stop them.
// The job's keeper kills the job's process group when its runner dies (see
// group); this is the backstop for when it could not: the keeper died with
// the runner (the OOM killer may take both), or a process of the job moved
// to a process group of its own (setsid, setpgid).
//
// jobMarkEnv marks the processes of one run of one job, so that when the
// job ends the runner kills those that left its process group.
const (
	jobEnv       = "TERMSIG_RUNNER_JOB"
	jobRunnerEnv = "TERMSIG_RUNNER_PID"
	jobMarkEnv   = "TERMSIG_JOB_MARK"
)

// killLeftovers kills the process groups of jobs left running by an
// earlier runner of the same name on this host that is gone, so that they
// do not race the re-run of the same jobs, and returns the groups it
// killed. The jobs of a runner of the same name that is still alive are
// left alone. It waits up to two seconds for the killed ones to end.
func killLeftovers(name string) []int {
	groups := map[int]bool{}
	for _, pid := range marked(jobEnv+"="+name, runnerAlive) {
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

// killMarked kills every process whose environment has entry, a job's
// marker: those still in the job's process group are dead already, and
// this finds those that left it (setsid, setpgid), and what they started.
// It scans again until it finds none, for at most a second, as one may
// have forked meanwhile, and returns the pids it killed. A process that
// clears its environment escapes it; a cgroup per job would not.
func killMarked(entry string) []int {
	var killed []int
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		pids := marked(entry, nil)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil && !slices.Contains(killed, pid) {
				killed = append(killed, pid)
			}
		}
	}
	return killed
}

// marked returns the other processes whose environment has entry, but for
// those for which skip (if not nil) returns true. A zombie has no
// environment left, and is not returned.
func marked(entry string, skip func(env []byte) bool) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil || !hasEntry(env, []byte(entry)) || skip != nil && skip(env) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// runnerAlive reports whether the runner that started a job, named in the
// job's environment env, is another process that is still alive. This
// process is not: it has just started (a re-executed image finishes its
// jobs before exec).
func runnerAlive(env []byte) bool {
	for _, kv := range bytes.Split(env, []byte{0}) {
		v, ok := bytes.CutPrefix(kv, []byte(jobRunnerEnv+"="))
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(string(v))
		if err != nil || pid <= 0 || pid == os.Getpid() {
			return false
		}
		err = syscall.Kill(pid, 0)
		return err == nil || errors.Is(err, syscall.EPERM)
	}
	return false
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
