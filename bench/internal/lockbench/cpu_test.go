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

// Script time is EVAL's and EVALSHA's usec, whatever else ran.
func TestParseScriptTime(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.0\r\nused_cpu_user:1.0\r\n\r\n# Commandstats\r\n" +
		"cmdstat_get:calls=5,usec=100,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=10,usec=1234,usec_per_call=123.40,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_eval:calls=1,usec=66,usec_per_call=66.00,rejected_calls=0,failed_calls=1\r\n"
	if got, want := parseScriptTime(info), 1300*time.Microsecond; got != want {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := parseScriptTime("# Commandstats\r\ncmdstat_set:calls=1,usec=9\r\n"); got != 0 {
		t.Errorf("no script ran, got %v", got)
	}
}

func TestInfoNumber(t *testing.T) {
	info := "# Stats\r\ntotal_connections_received:7\r\ntotal_commands_processed:12345\r\ntotal_net_input_bytes:99\r\n"
	if got := infoNumber(info, "total_commands_processed"); got != 12345 {
		t.Errorf("commands: got %v", got)
	}
	if got := infoNumber(info, "total_net_input_bytes"); got != 99 {
		t.Errorf("bytes: got %v", got)
	}
	if got := infoNumber(info, "total_net_output_bytes"); got != 0 {
		t.Errorf("absent: got %v", got)
	}
}
