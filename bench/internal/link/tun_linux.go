package link

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

const tunPath = "/dev/net/tun"

// openTUN creates a TUN device (IP packets, no packet-information header)
// in this process's network namespace; a %d in name is replaced by the
// kernel with the lowest free number. It returns the device's file, in
// blocking mode, and its name. The device exists as long as the file is
// open, in this process or any that inherited it.
func openTUN(name string) (*os.File, string, error) {
	fd, err := unix.Open(tunPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", permission("opening "+tunPath, err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		_ = unix.Close(fd)
		return nil, "", fmt.Errorf("link: device name %q: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		_ = unix.Close(fd)
		return nil, "", permission("creating TUN device "+name, err)
	}
	return os.NewFile(uintptr(fd), tunPath), ifr.Name(), nil
}

// txDropped returns the tx_drop counter of device dev in /proc/PID/net/dev
// (PID "self": this process's namespace): the packets the kernel gave up
// sending to the device's reader because its queue was full. 0 when the
// device is not listed.
func txDropped(pid, dev string) uint64 {
	b, err := os.ReadFile("/proc/" + pid + "/net/dev")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) != dev {
			continue
		}
		// receive: bytes packets errs drop fifo frame compressed multicast;
		// transmit: bytes packets errs drop ...
		f := strings.Fields(rest)
		if len(f) < 12 {
			return 0
		}
		var n uint64
		_, _ = fmt.Sscan(f[11], &n)
		return n
	}
	return 0
}
