package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// sampleProc reads the process pid's CPU time, from the first field of
// each of its threads' schedstat (nanoseconds, where utime and stime
// count 10 ms ticks), and its memory from its status.
func sampleProc(pid int) (procSample, error) {
	var s procSample
	dir := fmt.Sprintf("/proc/%d", pid)
	stats, err := filepath.Glob(filepath.Join(dir, "task", "*", "schedstat"))
	if err != nil || len(stats) == 0 {
		return s, fmt.Errorf("no schedstat for process %d", pid)
	}
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			return s, err // a thread that ended between the glob and the read
		}
		ns, err := strconv.ParseInt(strings.Fields(string(b) + " 0")[0], 10, 64)
		if err != nil {
			return s, fmt.Errorf("%s: %w", p, err)
		}
		s.cpu += time.Duration(ns)
	}
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return s, err
	}
	s.rss, s.hwm = statusBytes(status, "VmRSS:"), statusBytes(status, "VmHWM:")
	return s, nil
}

// statusBytes returns the value of field (such as "VmRSS:", in kB) in a
// /proc status file, in bytes; 0 if it is not there.
func statusBytes(status []byte, field string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpuModel returns the CPU's model name from /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
