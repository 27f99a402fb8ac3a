//go:build !unix

package termsig_test

const childEnv = "TERMSIG_TEST_DRAIN_CHILD"

func drainChild() int { return 1 }
