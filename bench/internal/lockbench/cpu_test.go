package lockbench

import (
	"testing"
	"time"
)

func TestParseServerCPU(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.500001\r\nused_cpu_sys_children:9.000000\r\nused_cpu_user_children:9.000000\r\n"
	got, err := parseServerCPU(info)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1750001 * time.Microsecond; got != want {
		t.Errorf("got %v, want %v (children not counted)", got, want)
	}
	if _, err := parseServerCPU("# CPU\r\nused_cpu_sys:1.0\r\n"); err == nil {
		t.Error("no error without used_cpu_user")
	}
	if _, err := parseServerCPU("used_cpu_sys:x\r\nused_cpu_user:1\r\n"); err == nil {
		t.Error("no error for a value that is not a number")
	}
}
