package link

import (
	"errors"
	"fmt"
	"io/fs"
)

// ErrNotPermitted is matched (errors.Is) by every error that a missing
// privilege caused.
var ErrNotPermitted = errors.New("link: not permitted")

// PrivilegeError is a step of setting up a link that this process may not
// take: it needs CAP_NET_ADMIN (TUN devices, addresses) and CAP_SYS_ADMIN
// (a network namespace, nsenter), which in practice means running as root.
type PrivilegeError struct {
	Step string // what was refused
	Err  error  // the cause, when a system call refused it
}

func (e *PrivilegeError) Error() string {
	s := "link: " + e.Step
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s + ": a link needs root (CAP_NET_ADMIN for the TUN devices, CAP_SYS_ADMIN for the network namespace); run as root (sudo make bench), or without -link-latency for loopback only"
}

// Unwrap returns ErrNotPermitted and the cause.
func (e *PrivilegeError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrNotPermitted}
	}
	return []error{ErrNotPermitted, e.Err}
}

// permission wraps err, from step, in a PrivilegeError when the kernel
// refused it for lack of privileges (EPERM, EACCES), and with the step's
// name otherwise.
func permission(step string, err error) error {
	if err == nil {
		return nil
	}
	if isPermission(err) {
		return &PrivilegeError{Step: step, Err: err}
	}
	return fmt.Errorf("link: %s: %w", step, err)
}

// isPermission reports whether err is the kernel refusing for lack of
// privileges (EPERM or EACCES).
func isPermission(err error) bool { return errors.Is(err, fs.ErrPermission) }
