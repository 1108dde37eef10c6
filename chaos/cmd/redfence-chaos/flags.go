package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// newFlagSet returns the flag set of the command name ("redfence-chaos demo"): its
// errors and -h go to stderr, and -h prints usage, then "Flags:" and the
// flags' defaults.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage+"\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// parseNoArgs is parseFlags for a command that takes flags only: it refuses
// positional arguments.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf(fs, "unexpected arguments: %q", fs.Args())
	}
	return nil
}

// errUsage marks command-line errors that a command's flag parser already
// reported.
var errUsage = errors.New("usage error")

// usageErrorf prints a message and a hint to the flag set's output and
// returns an error wrapping errUsage. The flag set's name is the command
// ("redfence-chaos demo").
func usageErrorf(fs *flag.FlagSet, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(fs.Output(), "%s: %s\nRun \"%s -h\" for the flags.\n", fs.Name(), msg, fs.Name())
	return fmt.Errorf("%w: %s", errUsage, msg)
}

// parseFlags parses args with fs. -h prints fs.Usage and returns
// flag.ErrHelp. A bad flag gets the flag package's one-line error, a hint
// when it is a duration without a unit, and a pointer to -h, not the whole
// usage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	// The flag package prints the whole usage after every error; only -h
	// should, so the usage is printed here.
	usage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		if usage != nil {
			usage()
		} else {
			fs.PrintDefaults()
		}
		return err
	}
	// The flag package has printed the error itself.
	if name, ok := durationFlagError(fs, err); ok {
		fmt.Fprintf(fs.Output(), "%s: -%s takes a duration with a unit, such as 300ms, 10s or 1m30s\n", fs.Name(), name)
	}
	fmt.Fprintf(fs.Output(), "Run \"%s -h\" for the flags.\n", fs.Name())
	return err
}

// durationFlagError returns the name of the duration flag whose value err
// (from fs.Parse) rejects.
func durationFlagError(fs *flag.FlagSet, err error) (string, bool) {
	// The flag package's wording: invalid value "5" for flag -ttl: parse error
	_, rest, ok := strings.Cut(err.Error(), "\" for flag -")
	if !ok {
		return "", false
	}
	name, _, _ := strings.Cut(rest, ":")
	f := fs.Lookup(name)
	if f == nil {
		return "", false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return "", false
	}
	_, isDuration := g.Get().(time.Duration)
	return name, isDuration
}

// parseCode is the exit code for a command line that failed to parse:
// exitOK after -h (flag.ErrHelp), exitUsage otherwise. It must only be
// called with a non-nil err.
func parseCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// failureCode is exitInterrupted when ctx was cancelled, else exitFailure.
func failureCode(ctx context.Context) int {
	if ctx.Err() != nil {
		return exitInterrupted
	}
	return exitFailure
}
