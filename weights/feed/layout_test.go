package feed

import (
	"fmt"
	"slices"
	"testing"

	"needle/weights/wire"
)

// queued takes each member's route waiting to be sent, by node name.
func queued(ms []*member) map[string][]string {
	out := map[string][]string{}
	for _, m := range ms {
		select {
		case r := <-m.routes:
			out[m.join.Node] = r
		default:
		}
	}
	return out
}

func join(l *Layout, names ...string) []*member {
	var ms []*member
	for _, n := range names {
		serve := ""
		if n[0] == 'r' { // relays are r*, leaves anything else
			serve = n + ":7070"
		}
		ms = append(ms, l.add(wire.Join{Node: n, Serve: serve}))
	}
	return ms
}

// TestLayoutShapes: a chain, a tree of fan-out 2, leaves under the last relays; every member
// gets its route with its ancestors nearest first.
func TestLayoutShapes(t *testing.T) {
	for _, tc := range []struct {
		fanout int
		names  []string
		want   map[string]string
	}{
		{1, []string{"r1", "r2", "r3"}, map[string]string{"r1": "[]", "r2": "[r1:7070]", "r3": "[r2:7070 r1:7070]"}},
		{2, []string{"r1", "r2", "r3", "r4", "r5"}, map[string]string{"r1": "[]", "r2": "[r1:7070]", "r3": "[r1:7070]",
			"r4": "[r2:7070 r1:7070]", "r5": "[r2:7070 r1:7070]"}},
		{1, []string{"r1", "a", "r2", "b", "c"}, map[string]string{"r1": "[]", "r2": "[r1:7070]",
			"a": "[r2:7070 r1:7070]", "b": "[r1:7070]", "c": "[r2:7070 r1:7070]"}},
		{1, []string{"a", "b"}, map[string]string{"a": "[]", "b": "[]"}},
	} {
		l := &Layout{Fanout: tc.fanout}
		ms := join(l, tc.names...)
		got := map[string]string{}
		for _, m := range ms {
			got[m.join.Node] = fmt.Sprint(m.route)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("fan-out %d, %v: routes %v, want %v", tc.fanout, tc.names, got, tc.want)
		}
	}
}

// TestLayoutChanges: a member that leaves is routed around, only changed routes are sent, a
// route not yet sent is replaced by the newer one, and a relay that joins again on the same
// address replaces its old membership.
func TestLayoutChanges(t *testing.T) {
	l := &Layout{}
	ms := join(l, "r1", "r2", "r3", "r4")
	if got := queued(ms); !slices.Equal(got["r4"], []string{"r3:7070", "r2:7070", "r1:7070"}) || len(got) != 4 {
		t.Fatalf("first routes %v", got)
	}
	l.remove(ms[1])
	if got := queued(ms); len(got) != 2 || !slices.Equal(got["r3"], []string{"r1:7070"}) || !slices.Equal(got["r4"], []string{"r3:7070", "r1:7070"}) {
		t.Fatalf("after r2 left: %v", got)
	}
	l.remove(ms[2])
	l.remove(ms[0])
	if got := queued(ms); len(got) != 1 || !slices.Equal(got["r4"], []string{}) {
		t.Fatalf("after r3 and r1 left, unsent routes replaced: %v", got)
	}
	again := l.add(wire.Join{Node: "r4 restarted", Serve: "r4:7070"})
	if rs := l.Routes(); len(rs) != 1 || rs[0][0] != "r4 restarted" {
		t.Fatalf("a relay joining again on its address: members %v", rs)
	}
	if got := queued([]*member{again}); !slices.Equal(got["r4 restarted"], []string{}) {
		t.Fatalf("its route %v", got)
	}
}
