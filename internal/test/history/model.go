package history

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
)

// state is one key's lock and store in the model. Its zero value is the
// initial state: no holder, nothing granted or stored.
type state struct {
	holder int   // grant ID of the holder (0: none)
	until  int64 // holder's validity end, ns since the recorder's start
	fence  int64 // highest fencing token granted
	stored int64 // highest token the store accepted
	// at is the earliest point the next operation can take effect: the
	// point of the one before it. Points are taken as early as each
	// operation allows, which never makes a later one harder to place.
	at int64
}

// seed starts an epoch: the state its key had at the cut.
type seed struct {
	key           string
	fence, stored int64
}

// step applies op at the earliest point it can take effect after s. It
// reports false if op cannot take effect: no point left in its interval,
// or the model forbids its outcome.
func step(s state, op *Op) (bool, state) {
	p := max(s.at, int64(op.Call))
	switch op.Kind {
	case Acquire:
		if s.holder != 0 {
			p = max(p, s.until) // the previous holder's lock has ended
		}
		if op.Token != 0 {
			if op.Token <= s.fence {
				return false, s
			}
			s.fence = op.Token
		}
		s.holder, s.until = op.Grant, int64(op.Until)
	case Extend:
		if s.holder != op.Grant {
			return false, s
		}
		s.until = max(s.until, int64(op.Until))
	case Release:
		if s.holder == op.Grant {
			s.holder, s.until = 0, 0
		}
	case Write:
		accepted := op.Token >= s.stored
		if accepted != (op.Outcome == OK) {
			return false, s
		}
		if accepted {
			s.stored = op.Token
		}
	default:
		return false, s
	}
	if p > int64(op.Return) {
		return false, s
	}
	s.at = p
	return true, s
}

// model is the porcupine model: inputs are *Op (outputs are the same) or
// seed.
var model = porcupine.Model{
	Partition: partition,
	Init:      func() any { return state{} },
	Step: func(st, in, _ any) (bool, any) {
		s := st.(state)
		switch in := in.(type) {
		case seed:
			return s == state{}, state{fence: in.fence, stored: in.stored}
		case *Op:
			return step(s, in)
		}
		return false, s
	},
	Hash: func(st any) uint64 {
		s := st.(state)
		h := uint64(s.holder)
		for _, v := range []int64{s.until, s.fence, s.stored, s.at} {
			h = (h ^ uint64(v)) * 0x100000001b3
		}
		return h
	},
	DescribeOperation: func(in, _ any) string {
		switch in := in.(type) {
		case seed:
			return fmt.Sprintf("epoch of %s: highest token granted %d, stored %d", in.key, in.fence, in.stored)
		case *Op:
			return describe(in)
		}
		return fmt.Sprint(in)
	},
	DescribeState: func(st any) string {
		s := st.(state)
		h := "free"
		if s.holder != 0 {
			h = fmt.Sprintf("held by #%d until %v", s.holder, time.Duration(s.until))
		}
		return fmt.Sprintf("%s, highest token granted %d, stored %d (at %v)", h, s.fence, s.stored, time.Duration(s.at))
	},
}

// describe renders op in one line.
func describe(op *Op) string {
	var res string
	switch op.Kind {
	case Acquire:
		res = fmt.Sprintf("granted #%d token %d until %v", op.Grant, op.Token, op.Until)
		if op.Outcome != OK {
			res = "refused"
		}
		return fmt.Sprintf("client %d acquire(%s) [%v, %v] → %s", op.Client, op.Key, op.Call, op.Return, res)
	case Extend:
		res = fmt.Sprintf("until %v", op.Until)
		if op.Outcome != OK {
			res = "refused"
		}
	case Write:
		res = "accepted"
		if op.Outcome != OK {
			res = "refused"
		}
		return fmt.Sprintf("client %d write(%s, token %d) by #%d [%v, %v] → %s", op.Client, op.Key, op.Token, op.Grant, op.Call, op.Return, res)
	case Release:
		res = "done"
	}
	return fmt.Sprintf("client %d %v(%s #%d) [%v, %v] → %s", op.Client, op.Kind, op.Key, op.Grant, op.Call, op.Return, res)
}
