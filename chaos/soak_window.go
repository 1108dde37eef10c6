package chaos

import (
	"slices"
	"time"
)

// mutexWindows cuts the MutexModel part of ops into windows of width w, for
// porcupine checks of a history too large to check whole.
//
// The unit is a lease: a granted Acquire (Op.Held) with the Releases of its
// lease called before its ValidUntil. A unit spans [Acquire.Call,
// max(Acquire.Return, ValidUntil)], and goes into every window
// [k*w, (k+1)*w) its span meets, so a unit may be in several windows. No
// violation is missed at a cut: the model rejects a grant B only while
// another lease A is the holder and valid at B's return, and then both
// spans contain B's Return, which lies in exactly one window. No violation
// is invented either: the ops left out change nothing the model checks (a
// failed or expired acquire is a no-op; a release called after its lease's
// validity frees a lock any later grant may take anyway). Windows with no
// unit are left out.
func mutexWindows(ops []Op, w time.Duration) [][]Op {
	if w <= 0 {
		return nil
	}
	byID := map[int]int{} // acquire ID -> unit index
	type unit struct {
		ops        []Op
		start, end time.Duration
	}
	var units []unit
	for _, op := range ops {
		if op.Held() {
			byID[op.ID] = len(units)
			units = append(units, unit{ops: []Op{op}, start: op.Call, end: max(op.Return, op.ValidUntil)})
		}
	}
	for _, op := range ops {
		if op.Kind != Release {
			continue
		}
		i, ok := byID[op.Lease]
		if !ok || op.Call >= units[i].ops[0].ValidUntil {
			continue
		}
		units[i].ops = append(units[i].ops, op)
	}
	windows := map[int64][]Op{}
	for _, u := range units {
		for k := int64(u.start / w); k <= int64(u.end/w); k++ {
			windows[k] = append(windows[k], u.ops...)
		}
	}
	keys := make([]int64, 0, len(windows))
	for k := range windows {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([][]Op, 0, len(keys))
	for _, k := range keys {
		win := windows[k]
		sortByCall(win)
		out = append(out, win)
	}
	return out
}

// windowVerdicts checks every window with porcupine's MutexModel, each
// check bounded by timeout, and returns the verdicts in window order.
func windowVerdicts(windows [][]Op, timeout time.Duration) []Verdict {
	out := make([]Verdict, len(windows))
	for i, win := range windows {
		v, err := CheckLinearizable(MutexModel, win, timeout)
		if err != nil { // MutexModel is known: cannot happen
			v = CheckTimedOut
		}
		out[i] = v
	}
	return out
}

// windowStream is mutexWindows and windowVerdicts, streamed: it checks a
// window, and forgets it, once no operation still to come can belong to
// it. A window [k*w, (k+1)*w) is complete once the watermark has passed
// (k+1)*w (every unit meeting it has been fed: a unit starts at its
// acquire's Call) and the ValidUntil of each of its units (every release
// kept with a unit is called before its ValidUntil). Windows are checked
// in order, as mutexWindows lists them.
type windowStream struct {
	w       time.Duration
	timeout time.Duration

	units map[int]*windowUnit   // by acquire ID, while releases may still join
	wins  map[int64]*windowOpen // windows not yet checked

	checked, violations, timeouts int
	failing                       [][]Op // the first soakArtifactWindows failing windows
}

type windowUnit struct {
	ops        []Op
	validUntil time.Duration
}

type windowOpen struct {
	units []*windowUnit
	ready time.Duration // the watermark at which it is complete
}

func newWindowStream(w, timeout time.Duration) *windowStream {
	return &windowStream{w: w, timeout: timeout, units: map[int]*windowUnit{}, wins: map[int64]*windowOpen{}}
}

func (s *windowStream) feed(op Op) {
	if s.w <= 0 {
		return
	}
	switch {
	case op.Held():
		u := &windowUnit{ops: []Op{op}, validUntil: op.ValidUntil}
		s.units[op.ID] = u
		end := max(op.Return, op.ValidUntil)
		for k := int64(op.Call / s.w); k <= int64(end/s.w); k++ {
			win := s.wins[k]
			if win == nil {
				win = &windowOpen{}
				s.wins[k] = win
			}
			win.units = append(win.units, u)
			win.ready = max(win.ready, time.Duration(k+1)*s.w, op.ValidUntil)
		}
	case op.Kind == Release:
		if u, ok := s.units[op.Lease]; ok && op.Call < u.validUntil {
			u.ops = append(u.ops, op)
		}
	}
}

// advance checks the windows complete at watermark wm.
func (s *windowStream) advance(wm time.Duration) {
	for id, u := range s.units {
		if u.validUntil <= wm {
			delete(s.units, id)
		}
	}
	var ready []int64
	for k, win := range s.wins {
		if win.ready <= wm {
			ready = append(ready, k)
		}
	}
	slices.Sort(ready)
	for _, k := range ready {
		var ops []Op
		for _, u := range s.wins[k].units {
			ops = append(ops, u.ops...)
		}
		delete(s.wins, k)
		sortByCall(ops)
		s.checked++
		switch windowVerdicts([][]Op{ops}, s.timeout)[0] {
		case Violation:
			s.violations++
			if len(s.failing) < soakArtifactWindows {
				s.failing = append(s.failing, ops)
			}
		case CheckTimedOut:
			s.timeouts++
		}
	}
}
