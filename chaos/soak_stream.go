package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redfence/redfence/chaos/internal/harness"
)

// soakChecker runs every check of a soak on its history as the history
// drains (History.drain), so that the soak's memory stays flat however long
// it runs: operations are checked in Call order and dropped, and each check
// keeps only what operations still to come can affect (soak_checks.go,
// soak_stats.go, windowStream). With a history file it also appends every
// operation to it, for the artifacts of a failed run.
type soakChecker struct {
	overlaps overlapStream
	fenced   fencedStream
	tokens   tokenStream
	stats    soakStats
	windows  *windowStream
	file     *historyFile // nil: none

	// Progress figures, read by the progress lines while the checks run.
	opsSeen, doubleSeen, fencedSeen, tokenSeen atomic.Int64
}

func newSoakChecker(start time.Duration, opts harness.SoakOptions, file *historyFile) *soakChecker {
	return &soakChecker{
		stats:   soakStats{start: start, window: availabilityWindow, acquireLimit: defaultAcquireTimeout + scenarioOverrunSlack},
		windows: newWindowStream(opts.Window, opts.CheckTimeout),
		file:    file,
	}
}

// feed checks ops, the next operations in Call order, and then everything
// complete at watermark w.
func (c *soakChecker) feed(ops []Op, w time.Duration) error {
	for _, op := range ops {
		c.overlaps.feed(op)
		c.fenced.feed(op)
		c.tokens.feed(op)
		c.stats.feed(op)
		c.windows.feed(op)
	}
	c.overlaps.advance(w)
	c.fenced.advance(w)
	c.tokens.advance(w)
	c.windows.advance(w)
	c.opsSeen.Store(int64(c.stats.ops))
	c.doubleSeen.Store(int64(c.overlaps.count))
	c.fencedSeen.Store(int64(c.fenced.count))
	c.tokenSeen.Store(int64(c.tokens.dups + c.tokens.regr))
	if c.file != nil {
		return c.file.write(ops)
	}
	return nil
}

// drainEvery feeds h's completed operations to c every d until ctx ends.
func (c *soakChecker) drainEvery(ctx context.Context, h *History, d time.Duration) error {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := c.feed(h.drain()); err != nil {
			return err
		}
	}
}

// finish feeds whatever is left in h, including operations that never
// completed (as Ops has them), and closes every check.
func (c *soakChecker) finish(h *History) error {
	ops, _ := h.drain()
	ops = append(ops, h.Ops()...) // only the never completed are left
	return c.feed(ops, Inf)
}

// historyFile is a history written as it drains, in WriteJSON's format
// (one operation per line), so that ReadHistoryJSON reads it back.
type historyFile struct {
	f    *os.File
	w    *bufio.Writer
	n    int
	mu   sync.Mutex
	done bool
}

func createHistoryFile(dir string) (*historyFile, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("chaos: soak history: %w", err)
	}
	f, err := os.CreateTemp(dir, ".soak-history-*.json")
	if err != nil {
		return nil, fmt.Errorf("chaos: soak history: %w", err)
	}
	hf := &historyFile{f: f, w: bufio.NewWriter(f)}
	if _, err := fmt.Fprintf(hf.w, "{\"version\": %d, \"ops\": [", historyVersion); err != nil {
		return nil, hf.fail(err)
	}
	return hf, nil
}

func (hf *historyFile) fail(err error) error {
	hf.f.Close()
	os.Remove(hf.f.Name())
	return fmt.Errorf("chaos: soak history: %w", err)
}

func (hf *historyFile) write(ops []Op) error {
	hf.mu.Lock()
	defer hf.mu.Unlock()
	for _, op := range ops {
		b, err := json.Marshal(op)
		if err != nil {
			return fmt.Errorf("chaos: soak history: %w", err)
		}
		sep := ",\n"
		if hf.n == 0 {
			sep = "\n"
		}
		hf.n++
		if _, err := hf.w.WriteString(sep); err != nil {
			return fmt.Errorf("chaos: soak history: %w", err)
		}
		if _, err := hf.w.Write(b); err != nil {
			return fmt.Errorf("chaos: soak history: %w", err)
		}
	}
	return nil
}

// keep closes the file and moves it to name.
func (hf *historyFile) keep(name string) error {
	if err := hf.close(); err != nil {
		return err
	}
	if err := os.Rename(hf.f.Name(), name); err != nil {
		return fmt.Errorf("chaos: soak history: %w", err)
	}
	return nil
}

// close ends the JSON and closes the file.
func (hf *historyFile) close() error {
	hf.mu.Lock()
	defer hf.mu.Unlock()
	if hf.done {
		return nil
	}
	hf.done = true
	_, err := hf.w.WriteString("\n]}\n")
	if err == nil {
		err = hf.w.Flush()
	}
	if err != nil {
		hf.f.Close()
		return fmt.Errorf("chaos: soak history: %w", err)
	}
	if err := hf.f.Close(); err != nil {
		return fmt.Errorf("chaos: soak history: %w", err)
	}
	return nil
}

// remove closes and deletes the file.
func (hf *historyFile) remove() error {
	err := hf.close()
	if rmErr := os.Remove(hf.f.Name()); rmErr != nil && !os.IsNotExist(rmErr) {
		err = fmt.Errorf("chaos: soak history: %w", rmErr)
	}
	return err
}
