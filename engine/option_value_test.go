package engine

import (
	"testing"
	"time"
)

// TestOptionValues: each With function sets in the call's options what
// its closure set before Option became a value — WithRetryDelay and
// WithMaxTries also mark the call wait-only (the first one named), so
// that TryLock refuses them; WithAutoExtend clamps a negative maxHold to
// 0; the zero Option changes nothing; Reentrant's prefix option sets the
// token prefix only; later options override earlier ones.
func TestOptionValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want callOpts
	}{
		{"none", nil, callOpts{}},
		{"zero", []Option{{}, {}}, callOpts{}},
		{"token", []Option{WithToken("tok")}, callOpts{token: "tok"}},
		{"retry-delay", []Option{WithRetryDelay(7 * time.Millisecond)}, callOpts{retryDelay: 7 * time.Millisecond, waitOnly: "WithRetryDelay"}},
		{"retry-delay-negative", []Option{WithRetryDelay(-time.Second)}, callOpts{retryDelay: -time.Second, waitOnly: "WithRetryDelay"}},
		{"max-tries", []Option{WithMaxTries(3)}, callOpts{maxTries: 3, waitOnly: "WithMaxTries"}},
		{"max-tries-zero", []Option{WithMaxTries(0)}, callOpts{waitOnly: "WithMaxTries"}},
		{"wait-only-first-named", []Option{WithMaxTries(2), WithRetryDelay(time.Millisecond)}, callOpts{maxTries: 2, retryDelay: time.Millisecond, waitOnly: "WithMaxTries"}},
		{"auto-extend", []Option{WithAutoExtend(time.Minute)}, callOpts{autoExtend: true, maxHold: time.Minute}},
		{"auto-extend-zero", []Option{WithAutoExtend(0)}, callOpts{autoExtend: true}},
		{"auto-extend-negative", []Option{WithAutoExtend(-time.Minute)}, callOpts{autoExtend: true}},
		{"master-timeout", []Option{WithMasterTimeout(3 * time.Second)}, callOpts{masterTimeout: 3 * time.Second}},
		{"fencing", []Option{WithFencing()}, callOpts{fencing: true}},
		{"prefix", []Option{{kind: optTokenPrefix, s: "owner:"}}, callOpts{tokenPrefix: "owner:"}},
		{"later-overrides", []Option{WithToken("a"), WithMasterTimeout(time.Second), WithToken("b"), WithMasterTimeout(2 * time.Second)}, callOpts{token: "b", masterTimeout: 2 * time.Second}},
	} {
		if got := applyOpts(tc.opts); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// applyOptsTo keeps what the call had set (RWLock, FairLock).
	base := callOpts{rw: 1, waiterID: "w"}
	if got := applyOptsTo(base, []Option{WithFencing()}); got.rw != 1 || got.waiterID != "w" || !got.fencing {
		t.Errorf("applyOptsTo: %+v, want the base's rw and waiterID kept", got)
	}
}
