package labrun

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the child (SIGKILL) when its parent goes away, so that a
// lab that dies leaves no shop behind, serving on its listener and holding its database.
// Strictly, Linux sends the signal when the OS thread that started the child ends; the Go
// runtime ends a thread only when a goroutine locked to it (runtime.LockOSThread) returns,
// which nothing in the shop or its tests does, so in practice it is when this process dies.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
