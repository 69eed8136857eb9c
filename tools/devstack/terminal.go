package main

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// takeForeground makes devstack the foreground process group of the terminal it was started
// from, so that a Ctrl-C there interrupts devstack alone (the services run in process groups
// of their own, and devstack stops them) and not `make` above it. GNU make, when interrupted,
// ends by the signal (status 130, "Interrupt") whatever its recipe did; left out of the
// interrupt, it waits for devstack and ends with devstack's status: 0 after an orderly stop.
// While devstack holds the terminal it ignores Ctrl-Z: stopped, it could not be resumed (the
// shell waits for make, not for devstack's group) and the terminal would hang. It does nothing
// when stdin is not the terminal's or devstack is not in its foreground (a pipe, CI, a
// background job). The function it returns gives the foreground back to the group that had it.
func takeForeground() (giveBack func()) {
	nothing := func() {}
	fd := os.Stdin.Fd()
	front, err := foregroundGroup(fd)
	if err != nil || front != syscall.Getpgrp() {
		return nothing
	}
	if err := syscall.Setpgid(0, 0); err != nil {
		return nothing
	}
	if err := setForegroundGroup(fd, syscall.Getpid()); err != nil {
		_ = syscall.Setpgid(0, front)
		return nothing
	}
	signal.Ignore(syscall.SIGTSTP)
	return func() { _ = setForegroundGroup(fd, front) }
}

func foregroundGroup(fd uintptr) (int, error) {
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return 0, errno
	}
	return int(pgrp), nil
}

// setForegroundGroup hands the terminal to group pgrp. A process outside the foreground that
// does so is sent SIGTTOU, which would stop it: it is ignored for the call.
func setForegroundGroup(fd uintptr, pgrp int) error {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	p := int32(pgrp)
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&p))); errno != 0 {
		return errno
	}
	return nil
}
