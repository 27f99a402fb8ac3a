package kubetest

import "syscall"

// sysProcAttr has the kernel SIGKILL a child when the thread that started
// it dies, so that a test binary killed by -timeout or a signal leaves no
// etcd or kube-apiserver behind. (Go ends threads only under
// runtime.LockOSThread, which the test's goroutines do not use.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
