//go:build !linux

package main

// sampleProc returns errNoProc: there is no /proc here.
func sampleProc(int) (procSample, error) { return procSample{}, errNoProc }

// cpuModel returns "unknown CPU": it reads Linux's /proc/cpuinfo.
func cpuModel() string { return "unknown CPU" }
