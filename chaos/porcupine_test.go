package chaos_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
)

// modelCase is one history and the verdict a model must give it.
type modelCase struct {
	name string
	ops  []chaos.Op
	want chaos.Verdict
}

// checkModel checks every case against m, each in its own subtest.
func checkModel(t *testing.T, m chaos.Model, cases []modelCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := chaos.CheckLinearizable(m, tc.ops, 5*time.Second)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			if m == chaos.MutexModel {
				// The exact check agrees with the model on these histories.
				assert.Equal(t, tc.want == chaos.Violation, len(chaos.Overlaps(tc.ops)) > 0, "Overlaps agrees")
			}
		})
	}
}

func TestMutexModel(t *testing.T) {
	checkModel(t, chaos.MutexModel, []modelCase{
		{"empty", nil, chaos.Linearizable},
		{"release then acquire", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), rel(1, 0, 0, 50, 60), acq(2, 1, 55, 70, 200, 2),
		}, chaos.Linearizable},
		{"acquire concurrent with the release", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), rel(1, 0, 0, 50, 80), acq(2, 1, 40, 60, 200, 2),
		}, chaos.Linearizable},
		{"acquire after the lease ran out", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), acq(1, 1, 90, 110, 300, 2), rel(2, 0, 0, 120, 130), acq(3, 2, 400, 410, 500, 3),
		}, chaos.Linearizable},
		{"acquire returning exactly when the lease ends", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), acq(1, 1, 90, 100, 300, 2),
		}, chaos.Linearizable},
		{"failed, unknown and expired acquires while held", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), acqStatus(1, 1, 20, 30, chaos.Fail), acqStatus(2, 2, 20, 0, chaos.Unknown),
			acq(3, 3, 20, 40, 35, 9), rel(4, 0, 0, 50, 60),
		}, chaos.Linearizable},
		{"concurrent acquires, one order works", []chaos.Op{
			acq(0, 0, 0, 10, 50, 1), acq(1, 1, 0, 60, 200, 2),
		}, chaos.Linearizable},

		{"two holders", []chaos.Op{acq(0, 0, 0, 10, 100, 1), acq(1, 1, 20, 30, 200, 2)}, chaos.Violation},
		{"granted before the release was called", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), acq(1, 1, 20, 30, 200, 2), rel(2, 0, 0, 40, 50),
		}, chaos.Violation},
		{"an old lease's release does not free the lock", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), acq(1, 1, 100, 120, 300, 2), rel(2, 0, 0, 130, 140), acq(3, 2, 150, 160, 400, 3),
		}, chaos.Violation},
		{"concurrent acquires that both outlast the other's return", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), acq(1, 1, 0, 20, 100, 2),
		}, chaos.Violation},
	})
}

func TestRegisterModel(t *testing.T) {
	invalid := write(1, 1, 20, 30, chaos.Fail, 9, "x")
	invalid.Note = "" // failed for another reason than a stale token: the guard never judged it
	checkModel(t, chaos.RegisterModel, []modelCase{
		{"empty", nil, chaos.Linearizable},
		{"writes, reads and a rejection", []chaos.Op{
			write(0, 0, 0, 10, chaos.OK, 5, "a"), read(1, 0, 20, 30, "a"), write(2, 1, 40, 50, chaos.OK, 7, "b"),
			write(3, 0, 60, 70, chaos.Fail, 6, "c"), read(4, 1, 80, 90, "b"),
		}, chaos.Linearizable},
		{"initial value", []chaos.Op{read(0, 0, 0, 10, "")}, chaos.Linearizable},
		{"equal tokens accepted", []chaos.Op{
			write(0, 0, 0, 10, chaos.OK, 5, "a"), write(1, 0, 20, 30, chaos.OK, 5, "b"), read(2, 0, 40, 50, "b"),
		}, chaos.Linearizable},
		{"concurrent writes in token order", []chaos.Op{
			write(0, 0, 0, 50, chaos.OK, 5, "a"), write(1, 1, 10, 20, chaos.OK, 7, "b"), read(2, 2, 30, 40, "b"), read(3, 2, 60, 70, "b"),
		}, chaos.Linearizable},
		{"unknown write applied", []chaos.Op{
			write(0, 0, 0, 10, chaos.OK, 5, "a"), write(1, 1, 20, 0, chaos.Unknown, 7, "b"), read(2, 0, 30, 40, "a"), read(3, 0, 50, 60, "b"),
		}, chaos.Linearizable},
		{"unknown write never applied", []chaos.Op{
			write(0, 0, 0, 10, chaos.OK, 5, "a"), write(1, 1, 20, 0, chaos.Unknown, 7, "b"), read(2, 0, 50, 60, "a"),
			write(3, 0, 70, 80, chaos.OK, 6, "c"),
		}, chaos.Linearizable},
		{"write that failed otherwise is left out", []chaos.Op{
			write(0, 0, 0, 10, chaos.OK, 5, "a"), invalid, read(2, 0, 40, 50, "a"),
		}, chaos.Linearizable},

		{"stale write accepted", []chaos.Op{write(0, 0, 0, 10, chaos.OK, 7, "a"), write(1, 1, 20, 30, chaos.OK, 5, "b")}, chaos.Violation},
		{"fresh write rejected", []chaos.Op{write(0, 0, 0, 10, chaos.OK, 5, "a"), write(1, 1, 20, 30, chaos.Fail, 7, "b")}, chaos.Violation},
		{"read of a value never written", []chaos.Op{write(0, 0, 0, 10, chaos.OK, 5, "a"), read(1, 0, 20, 30, "zzz")}, chaos.Violation},
		{"stale read", []chaos.Op{
			write(0, 0, 0, 10, chaos.OK, 5, "a"), write(1, 1, 20, 30, chaos.OK, 7, "b"), read(2, 0, 40, 50, "a"),
		}, chaos.Violation},
		{"unknown stale write cannot explain a read", []chaos.Op{
			write(0, 0, 0, 10, chaos.OK, 7, "a"), write(1, 1, 20, 0, chaos.Unknown, 5, "b"), read(2, 0, 30, 40, "b"),
		}, chaos.Violation},
	})
}

func TestCheckLinearizableUnknownModel(t *testing.T) {
	_, err := chaos.CheckLinearizable(chaos.Model(42), nil, time.Second)
	assert.ErrorIs(t, err, chaos.ErrUnknownModel)
	_, err = chaos.PorcupineOperations(chaos.Model(0), nil)
	assert.ErrorIs(t, err, chaos.ErrUnknownModel)
}

func TestPorcupineOperations(t *testing.T) {
	ops := []chaos.Op{
		acq(0, 0, 0, 10, 100, 1), acqStatus(1, 1, 5, 0, chaos.Unknown), rel(2, 0, 0, 20, 30),
		write(3, 0, 11, 12, chaos.OK, 1, "a"), read(4, 0, 13, 14, "a"),
		{ID: 5, Client: chaos.NemesisClient, Kind: chaos.Fault, Call: 0, Return: 50 * ms, Status: chaos.OK, Note: "kill"},
	}
	mutex, err := chaos.PorcupineOperations(chaos.MutexModel, ops)
	require.NoError(t, err)
	require.Len(t, mutex, 3, "acquires and releases only")
	assert.Equal(t, int64(10*ms), mutex[0].Return)
	assert.Equal(t, int64(chaos.Inf), mutex[1].Return, "unknown ops return at +inf")
	reg, err := chaos.PorcupineOperations(chaos.RegisterModel, ops)
	require.NoError(t, err)
	assert.Len(t, reg, 2, "fenced writes and reads only")

	ann := chaos.FaultAnnotations(ops)
	require.Len(t, ann, 1)
	assert.Equal(t, "kill", ann[0].Description)
	assert.Equal(t, int64(50*ms), ann[0].End)
}

func TestCombineVerdicts(t *testing.T) {
	for _, tc := range []struct {
		in   []chaos.Verdict
		want chaos.Verdict
	}{
		{nil, chaos.Linearizable},
		{[]chaos.Verdict{chaos.Linearizable, chaos.Linearizable}, chaos.Linearizable},
		{[]chaos.Verdict{chaos.Linearizable, chaos.CheckTimedOut}, chaos.CheckTimedOut},
		{[]chaos.Verdict{chaos.CheckTimedOut, chaos.Violation}, chaos.Violation},
	} {
		assert.Equal(t, tc.want, chaos.CombineVerdicts(tc.in...), "%v", tc.in)
	}
}

func TestWriteArtifacts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ops     []chaos.Op
		summary []string
	}{
		{"safe", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), write(1, 0, 11, 12, chaos.OK, 1, "a"), rel(2, 0, 0, 20, 30),
			{ID: 3, Client: chaos.NemesisClient, Kind: chaos.Fault, Call: 5 * ms, Return: 25 * ms, Status: chaos.OK, Note: "pause n1"},
			acq(4, 1, 15, 40, 200, 2), write(5, 1, 41, 42, chaos.OK, 2, "b"),
		}, []string{"seed: 42", "double grants: 0", "fenced violations: 0", "mutex model: ok", "register model: ok", "scenario"}},
		{"double grant", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), write(1, 0, 11, 12, chaos.OK, 1, "a"),
			acq(2, 1, 15, 40, 200, 2), write(3, 1, 41, 42, chaos.OK, 2, "b"), write(4, 0, 50, 51, chaos.OK, 1, "c"),
		}, []string{"double grants: 1", "fenced violations: 1", "stale-accepted", "mutex model: violation", "register model: violation"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			h := historyOf(t, tc.ops...)
			require.NoError(t, chaos.WriteArtifacts(dir, 42, h, 5*time.Second, chaos.Result{Scenario: "baseline"}))
			for _, name := range []string{"history.json", "mutex.html", "register.html", "summary.txt"} {
				b, err := os.ReadFile(filepath.Join(dir, name))
				require.NoError(t, err, name)
				assert.NotEmpty(t, b, name)
				if strings.HasSuffix(name, ".html") {
					assert.Contains(t, string(b), "<html", name)
				}
			}
			summary, err := os.ReadFile(filepath.Join(dir, "summary.txt"))
			require.NoError(t, err)
			for _, s := range tc.summary {
				assert.Contains(t, string(summary), s)
			}
			f, err := os.Open(filepath.Join(dir, "history.json"))
			require.NoError(t, err)
			defer f.Close()
			replay, err := chaos.ReadHistoryJSON(f)
			require.NoError(t, err)
			assert.Equal(t, h.Ops(), replay.Ops(), "history.json replays the run")
		})
	}
	assert.ErrorIs(t, chaos.WriteArtifacts(t.TempDir(), 1, nil, time.Second), chaos.ErrInvalidHistory)
}
