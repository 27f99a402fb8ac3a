// Package runner runs an unpacked actions/runner release: config.sh to
// register it, run.sh supervised in a process group of its own, whose
// output tells which job the runner runs. It keeps ghrunner's API token
// out of their environment, and can run them as another user. It needs a
// Unix system.
package runner
