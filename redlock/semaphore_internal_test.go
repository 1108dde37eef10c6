package redlock

import "testing"

// TestSemQuorum checks SemQuorum against its definition, the least q with
// (k+1)*q > n*k, and against the table in docs/shapes.md.
func TestSemQuorum(t *testing.T) {
	for n := 1; n <= 9; n++ {
		for k := 1; k <= 12; k++ {
			q := semQuorum(n, k)
			if (k+1)*q <= n*k || (k+1)*(q-1) > n*k || q > n {
				t.Errorf("SemQuorum(%d, %d) = %d", n, k, q)
			}
		}
	}
	for _, c := range []struct{ n, k, q int }{{1, 5, 1}, {3, 2, 3}, {5, 1, 3}, {5, 2, 4}, {5, 3, 4}, {5, 4, 5}, {7, 5, 6}, {7, 6, 7}} {
		if got := semQuorum(c.n, c.k); got != c.q {
			t.Errorf("SemQuorum(%d, %d) = %d, want %d", c.n, c.k, got, c.q)
		}
	}
}
