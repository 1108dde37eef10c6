package enum_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/internal/enum"
)

type color int

// Values outside 1..len(names) have no name; String then says the type
// and the number.
func TestString(t *testing.T) {
	names := []string{"red", "green"}
	for v, want := range map[color]string{1: "red", 2: "green", 0: "color(0)", 3: "color(3)", -1: "color(-1)"} {
		assert.Equal(t, want, enum.String(names, v))
		_, ok := enum.Name(names, v)
		assert.Equal(t, v == 1 || v == 2, ok, "Name(%d)", v)
	}
}
