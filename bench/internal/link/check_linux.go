package link

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Capability bits (linux/capability.h).
const (
	capNetAdmin = 12
	capSysAdmin = 21
)

// tools are the programs a link runs, with the Debian package of each.
var tools = []struct{ name, pkg string }{{"ip", "iproute2"}, {"nsenter", "util-linux"}}

// Check reports whether this process can open a link: the capabilities
// (a *PrivilegeError, matching ErrNotPermitted, when one is missing), the
// TUN driver and the programs it runs. It changes nothing.
func Check() error {
	eff, err := effectiveCaps()
	if err != nil {
		return fmt.Errorf("link: reading this process's capabilities: %w", err)
	}
	var missing []string
	for _, c := range []struct {
		bit  uint
		name string
	}{{capNetAdmin, "CAP_NET_ADMIN"}, {capSysAdmin, "CAP_SYS_ADMIN"}} {
		if eff&(1<<c.bit) == 0 {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		return &PrivilegeError{Step: fmt.Sprintf("this process (effective uid %d) lacks %s", os.Geteuid(), strings.Join(missing, " and "))}
	}
	if _, err := os.Stat(tunPath); err != nil {
		return fmt.Errorf("link: no TUN driver (%w): the kernel needs CONFIG_TUN", err)
	}
	for _, t := range tools {
		if _, err := exec.LookPath(t.name); err != nil {
			return fmt.Errorf("link: %s not found (%w): apt-get install %s", t.name, err, t.pkg)
		}
	}
	return nil
}

// effectiveCaps returns the CapEff mask of /proc/self/status.
func effectiveCaps() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no CapEff line")
}
