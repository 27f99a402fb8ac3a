package main

import (
	"context"
	"fmt"
	"io"
)

func sourcesMain(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "not yet")
	return 1
}

func fakeMain(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "not yet")
	return 1
}
