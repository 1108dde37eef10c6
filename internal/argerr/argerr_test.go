package argerr

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNew(t *testing.T) {
	err := New("coord", "retention", "must be positive, got %v", -1)
	assert.EqualError(t, err, "coord: invalid retention: must be positive, got -1")
	assert.ErrorIs(t, err, ErrInvalid)
	var e *Error
	if assert.True(t, errors.As(err, &e)) {
		assert.Equal(t, "coord", e.Pkg)
		assert.Equal(t, "retention", e.Field)
	}
}
