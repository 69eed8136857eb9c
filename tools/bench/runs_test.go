package main

import (
	"fmt"
	"testing"
	"time"
)

func TestChainOps(t *testing.T) {
	ops := chainOps(40)
	adds, connects := 0, 0
	for i, op := range ops {
		switch op["operation_type"] {
		case "add":
			adds++
			want := "log"
			if op["block_id"] == "b0" {
				want = "trigger.manual"
			}
			if op["type"] != want {
				t.Errorf("op %d: block %v has type %v, want %s", i, op["block_id"], op["type"], want)
			}
		case "connect":
			k := connects + 1
			if op["block_id"] != fmt.Sprintf("b%d", k-1) || op["target_block_id"] != fmt.Sprintf("b%d", k) {
				t.Errorf("connect %d: %v → %v, want b%d → b%d", connects, op["block_id"], op["target_block_id"], k-1, k)
			}
			connects++
		default:
			t.Errorf("op %d: unexpected %v", i, op["operation_type"])
		}
	}
	if adds != 40 || connects != 39 {
		t.Fatalf("%d blocks, %d edges; want 40, 39", adds, connects)
	}
	if len(chainOps(2)) != 3 {
		t.Fatalf("chainOps(2): %d ops, want 3 (trigger, log, edge)", len(chainOps(2)))
	}
}

func TestRunViewAPIDuration(t *testing.T) {
	r := runView{CreatedAt: "2026-01-02T03:04:05.100Z", FinishedAt: "2026-01-02T03:04:05.175Z"}
	if d, ok := r.apiDuration(); !ok || d != 75*time.Millisecond {
		t.Fatalf("got %s %v, want 75ms true", d, ok)
	}
	for _, r := range []runView{
		{CreatedAt: "2026-01-02T03:04:05Z", FinishedAt: "2026-01-02T03:04:06Z"}, // whole seconds
		{CreatedAt: "2026-01-02T03:04:05.1Z"},                                   // not finished
	} {
		if _, ok := r.apiDuration(); ok {
			t.Errorf("%+v: ok, want not", r)
		}
	}
}

func TestSequentialStats(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	st := sequentialStats(lat, 2, "boom", 10*time.Second)
	if st.N != 102 || st.StatusErrors != 2 || st.FirstError != "boom" || st.TargetRate != 0 {
		t.Fatalf("counts: %+v", st)
	}
	if st.P50 != 50*time.Millisecond || st.P90 != 90*time.Millisecond || st.P99 != 99*time.Millisecond || st.Max != 100*time.Millisecond {
		t.Fatalf("percentiles: %+v", st)
	}
	if st.AchievedRate != 10 {
		t.Fatalf("achieved %g, want 10", st.AchievedRate)
	}
	if lat[0] != 100*time.Millisecond {
		t.Fatal("sequentialStats sorted its input in place")
	}
}

func TestRunStarted(t *testing.T) {
	if err := runStarted([]byte(`{"runId":"r1","spec":"svc-runtime"}`)); err != nil {
		t.Fatal(err)
	}
	if err := runStarted([]byte(`{"spec":"svc-runtime"}`)); err == nil {
		t.Fatal("no runId accepted")
	}
}
