package main

import (
	"context"
	"fmt"
	"io"

	"github.com/termsig/termsig/cmd/termsig/internal/sourcescmd"
)

func sourcesMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return sourcescmd.Main(ctx, args, stdout, stderr)
}

func fakeMain(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "not yet")
	return 1
}
