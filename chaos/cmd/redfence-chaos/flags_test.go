package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parseCase is one command line for a flag parser that returns a C: the
// configuration it must give, or what it must print when it refuses it.
type parseCase[C any] struct {
	name    string
	args    []string
	want    C
	wantErr string // substring of stderr when parsing must fail
}

// checkParse runs parse on each case. A refusal must print wantErr, and
// wrap errIs unless it is nil; a success prints nothing.
func checkParse[C any](t *testing.T, parse func([]string, io.Writer) (C, error), errIs error, tests []parseCase[C]) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			got, err := parse(tt.args, &stderr)
			if tt.wantErr != "" {
				require.Error(t, err)
				if errIs != nil {
					assert.ErrorIs(t, err, errIs)
				}
				assert.Contains(t, stderr.String(), tt.wantErr)
				return
			}
			require.NoError(t, err, stderr.String())
			assert.Equal(t, tt.want, got)
			assert.Empty(t, stderr.String())
		})
	}
}

// checkParseHelp checks that parse answers -h with flag.ErrHelp and a help
// text that contains usage.
func checkParseHelp[C any](t *testing.T, parse func([]string, io.Writer) (C, error), usage string) {
	t.Helper()
	var stderr bytes.Buffer
	_, err := parse([]string{"-h"}, &stderr)
	assert.True(t, errors.Is(err, flag.ErrHelp), "got %v", err)
	assert.Contains(t, stderr.String(), usage)
}
