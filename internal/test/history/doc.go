// Package history records what lock clients saw — each acquire, extend,
// release and fenced write with the real-time bounds of its call — and
// checks that record against a model of a lease lock with fencing, with
// the linearizability checker porcupine (github.com/anishathalye/porcupine,
// the checker of etcd's robustness tests).
//
// The model, per key: a holder (a grant) with a validity end in real time,
// the highest fencing token granted and the highest token the store
// accepted. A history passes when each operation can be given a point
// within its [call, return] interval, the points ordered as the operations
// are replayed, such that in that order:
//
//   - a grant's point is at or after the validity end of the holder before
//     it, unless that holder was released at an earlier point;
//   - a grant's fencing token (0: unfenced, not compared) is above every
//     token granted before it;
//   - an extend succeeds only for the current holder, and moves its
//     validity end to the later of the two;
//   - the store accepts a write when its token is at least the highest it
//     accepted, and refuses it otherwise.
//
// Refused and failed acquires and extends change nothing in the model
// (Redlock may refuse at any time), so a Recorder only counts them.
//
// What it does not check: a holder's use of its lock (the fault package's
// Checker counts holders inside the critical section), the validity a
// grant should have had (it takes the validity end the client was told),
// and operations whose call never completed (a [Call] not completed is not
// in the history).
//
// Check scales by partitioning: per key, then per epoch — a key's history
// is cut where no operation spans the cut, every earlier holder was
// released or its validity ended before the cut, and no later operation
// extends an earlier grant. Such a cut loses nothing: the state after it
// is then the same in every linearization of what came before (no holder,
// the highest token granted, the highest token stored), and each epoch
// starts from it.
package history
