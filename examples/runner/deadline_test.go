//go:build linux

package main

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
)

func TestDeadlineOf(t *testing.T) {
	seen := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &runner{cfg: config{stopTimeout: 80 * time.Second}}
	tests := []struct {
		name           string
		deadline, want time.Time
	}{
		{"none: -stop-timeout", time.Time{}, seen.Add(80 * time.Second)},
		{"within -stop-timeout", seen.Add(30 * time.Second), seen.Add(30 * time.Second)},
		{"exactly -stop-timeout", seen.Add(80 * time.Second), seen.Add(80 * time.Second)},
		{"passed already", seen.Add(-time.Second), seen.Add(-time.Second)},
		{"two minutes: capped", seen.Add(2 * time.Minute), seen.Add(80 * time.Second)},
		{"the year 9999: capped", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), seen.Add(80 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.deadlineOf(termsig.Notice{Kind: termsig.Terminate, Observed: seen, Deadline: tt.deadline})
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestExtendUsecSaturates(t *testing.T) {
	tests := []struct {
		name string
		left time.Duration
		want int64
	}{
		{"passed", -time.Hour, 5e6},
		{"none left", 0, 5e6},
		{"a minute", time.Minute, 65e6},
		{"the longest duration", math.MaxInt64, math.MaxInt64 / 1000},
		{"just below it", math.MaxInt64 - 5*time.Second, (math.MaxInt64 - 5*time.Second + 5*time.Second).Microseconds()},
		{"until the year 9999", time.Until(time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)), math.MaxInt64 / 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := extendUsec(tt.left)
			assert.Equal(t, tt.want, got)
			assert.Positive(t, got)
		})
	}
}
