package main

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func mustParse(t *testing.T, lines ...string) []porcupine.Operation {
	t.Helper()
	ops, err := parse(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return ops
}

func result(t *testing.T, ops []porcupine.Operation) porcupine.CheckResult {
	t.Helper()
	res, _ := check(ops, 10*time.Second)
	return res
}

func TestSequentialHistoryIsLinearizable(t *testing.T) {
	ops := mustParse(t,
		`{"client":0,"op":"get","key":"a","call":0,"return":5,"found":false}`,
		`{"client":0,"op":"set","key":"a","value":"1","call":10,"return":20}`,
		`{"client":1,"op":"get","key":"a","call":30,"return":40,"found":true,"result":"1"}`,
		`{"client":1,"op":"append","key":"a","value":"xy","call":50,"return":60,"result":3}`,
		`{"client":0,"op":"get","key":"a","call":70,"return":80,"found":true,"result":"1xy"}`,
		`{"client":0,"op":"del","key":"a","call":90,"return":95,"result":1}`,
		`{"client":1,"op":"incr","key":"a","call":100,"return":110,"result":1}`,
		`{"client":1,"op":"incr","key":"a","call":120,"return":130,"result":2}`,
	)
	if r := result(t, ops); r != porcupine.Ok {
		t.Fatalf("got %v, want Ok", r)
	}
}

func TestReadConcurrentWithWritesMaySeeEither(t *testing.T) {
	for _, seen := range []string{"1", "2"} {
		ops := mustParse(t,
			`{"client":0,"op":"set","key":"a","value":"1","call":0,"return":10}`,
			`{"client":0,"op":"set","key":"a","value":"2","call":20,"return":40}`,
			`{"client":1,"op":"get","key":"a","call":25,"return":35,"found":true,"result":"`+seen+`"}`,
		)
		if r := result(t, ops); r != porcupine.Ok {
			t.Fatalf("read of %s during the write: got %v, want Ok", seen, r)
		}
	}
}

// A forged stale read: the second write was acknowledged before the read began, yet the read returns the
// first value. The checker must refuse it.
func TestStaleReadIsNotLinearizable(t *testing.T) {
	ops := mustParse(t,
		`{"client":0,"op":"set","key":"a","value":"1","call":0,"return":10}`,
		`{"client":0,"op":"set","key":"a","value":"2","call":20,"return":30}`,
		`{"client":1,"op":"get","key":"a","call":40,"return":50,"found":true,"result":"1"}`,
	)
	if r := result(t, ops); r != porcupine.Illegal {
		t.Fatalf("got %v, want Illegal", r)
	}
}

// A lost acknowledged write: an INCR acknowledged with 2, then a read that sees 1.
func TestLostIncrementIsNotLinearizable(t *testing.T) {
	ops := mustParse(t,
		`{"client":0,"op":"incr","key":"c","call":0,"return":10,"result":1}`,
		`{"client":1,"op":"incr","key":"c","call":20,"return":30,"result":2}`,
		`{"client":0,"op":"get","key":"c","call":40,"return":50,"found":true,"result":"1"}`,
	)
	if r := result(t, ops); r != porcupine.Illegal {
		t.Fatalf("got %v, want Illegal", r)
	}
}

// An operation whose reply never came may have happened or not, but not both ways to two readers in turn.
func TestUnknownOutcome(t *testing.T) {
	for _, seen := range []string{"1", "2"} {
		ops := mustParse(t,
			`{"client":0,"op":"set","key":"a","value":"1","call":0,"return":10}`,
			`{"client":1,"op":"set","key":"a","value":"2","call":20,"return":null}`,
			`{"client":2,"op":"get","key":"a","call":40,"return":50,"found":true,"result":"`+seen+`"}`,
		)
		if r := result(t, ops); r != porcupine.Ok {
			t.Fatalf("unknown write, later read of %s: got %v, want Ok", seen, r)
		}
	}
	ops := mustParse(t,
		`{"client":0,"op":"set","key":"a","value":"1","call":0,"return":10}`,
		`{"client":1,"op":"set","key":"a","value":"2","call":20,"return":null}`,
		`{"client":2,"op":"get","key":"a","call":40,"return":50,"found":true,"result":"2"}`,
		`{"client":2,"op":"get","key":"a","call":60,"return":70,"found":true,"result":"1"}`,
	)
	if r := result(t, ops); r != porcupine.Illegal {
		t.Fatalf("a write seen and then unseen: got %v, want Illegal", r)
	}
}

func TestKeysAreIndependent(t *testing.T) {
	ops := mustParse(t,
		`{"client":0,"op":"set","key":"a","value":"1","call":0,"return":10}`,
		`{"client":1,"op":"get","key":"b","call":20,"return":30,"found":false}`,
		`{"client":1,"op":"append","key":"b","value":"zz","call":40,"return":50,"result":2}`,
	)
	if r := result(t, ops); r != porcupine.Ok {
		t.Fatalf("got %v, want Ok", r)
	}
}

func TestMalformedHistoriesAreRefused(t *testing.T) {
	for _, line := range []string{
		`{"client":0,"op":"set","key":"a","value":"1"}`,
		`{"client":0,"op":"frob","key":"a","call":1,"return":2}`,
		`{"client":0,"op":"get","key":"a","call":5,"return":2,"found":false}`,
		`{"client":0,"op":"append","key":"a","value":"x","call":1,"return":2,"result":"three"}`,
		`{"client":-1,"op":"get","key":"a","call":1,"return":2,"found":false}`,
		`{"client":0,"op":"get","key":"a","call":1,"return":2,"found":false,"extra":1}`,
		`not json`,
	} {
		if _, err := parse(strings.NewReader(line)); err == nil {
			t.Errorf("accepted %s", line)
		}
	}
}
