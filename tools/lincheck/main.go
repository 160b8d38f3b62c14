// Command lincheck checks a recorded history of Redis string commands for linearizability with Porcupine
// (github.com/anishathalye/porcupine), partitioned by key.
//
// Usage:
//
//	lincheck [-timeout 60s] [-html out.html] history.jsonl
//
// The history has one JSON object per line, one per completed or abandoned operation:
//
//	{"client":0,"op":"set","key":"k1","value":"a","call":1000,"return":2000}
//	{"client":1,"op":"get","key":"k1","call":1500,"return":2500,"found":true,"result":"a"}
//	{"client":2,"op":"append","key":"k2","value":"x","call":1600,"return":2600,"result":3}
//	{"client":3,"op":"incr","key":"k3","call":1700,"return":null}
//
// call and return are nanoseconds on one monotonic clock; a null or missing return marks an operation whose
// reply never came (it may or may not have taken effect). result is the reply: get's value (with found), the
// integer of append (new length), incr (new value) and del (keys removed); set needs none.
//
// Exit status: 0 linearizable, 1 not linearizable (the key and, with -html, a picture of the longest
// linearizable prefix), 2 the checker gave up at the timeout, 3 a malformed history.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/anishathalye/porcupine"
)

// record is one line of the history file.
type record struct {
	Client int             `json:"client"`
	Op     string          `json:"op"`
	Key    string          `json:"key"`
	Value  string          `json:"value"`
	Call   *int64          `json:"call"`
	Return *int64          `json:"return"`
	Found  bool            `json:"found"`
	Result json.RawMessage `json:"result"`
}

// maxLine bounds one history line: a value the recorder writes is short, a longer line is a broken file.
const maxLine = 1 << 20

func parse(r io.Reader) ([]porcupine.Operation, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLine)
	var ops []porcupine.Operation
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var rec record
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		op, err := operation(rec)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %v", line+1, err)
	}
	return ops, nil
}

func operation(rec record) (porcupine.Operation, error) {
	if rec.Call == nil {
		return porcupine.Operation{}, errors.New("no call time")
	}
	if rec.Client < 0 {
		return porcupine.Operation{}, fmt.Errorf("client %d is negative", rec.Client)
	}
	in := input{op: rec.Op, key: rec.Key, value: rec.Value}
	out := output{unknown: rec.Return == nil}
	ret := int64(math.MaxInt64)
	if rec.Return != nil {
		ret = *rec.Return
		if ret < *rec.Call {
			return porcupine.Operation{}, fmt.Errorf("returns (%d) before its call (%d)", ret, *rec.Call)
		}
	}
	switch rec.Op {
	case "get":
		if !out.unknown {
			out.found = rec.Found
			if rec.Found {
				if err := json.Unmarshal(rec.Result, &out.value); err != nil {
					return porcupine.Operation{}, fmt.Errorf("get: result is not a string: %v", err)
				}
			}
		}
	case "set":
	case "append", "incr", "del":
		if !out.unknown {
			if err := json.Unmarshal(rec.Result, &out.number); err != nil {
				return porcupine.Operation{}, fmt.Errorf("%s: result is not an integer: %v", rec.Op, err)
			}
		}
	default:
		return porcupine.Operation{}, fmt.Errorf("unknown op %q (get, set, append, incr, del)", rec.Op)
	}
	return porcupine.Operation{ClientId: rec.Client, Input: in, Call: *rec.Call, Output: out, Return: ret}, nil
}

// check runs Porcupine on the history; the info is for -html.
func check(ops []porcupine.Operation, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	return porcupine.CheckOperationsVerbose(kvModel, ops, timeout)
}

func main() {
	timeout := flag.Duration("timeout", 60*time.Second, "give up (exit 2) after this long")
	html := flag.String("html", "", "write a visualization of the check to this file")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: lincheck [-timeout D] [-html FILE] HISTORY.jsonl")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(3)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "lincheck:", err)
		os.Exit(3)
	}
	ops, err := parse(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "lincheck: %s: %v\n", flag.Arg(0), err)
		os.Exit(3)
	}
	start := time.Now()
	res, info := check(ops, *timeout)
	if *html != "" {
		if err := porcupine.VisualizePath(kvModel, info, *html); err != nil {
			fmt.Fprintln(os.Stderr, "lincheck: writing the visualization:", err)
		}
	}
	took := time.Since(start).Round(time.Millisecond)
	switch res {
	case porcupine.Ok:
		fmt.Printf("linearizable: %d operations checked in %v\n", len(ops), took)
	case porcupine.Illegal:
		fmt.Printf("NOT linearizable: %d operations (checked in %v)\n", len(ops), took)
		os.Exit(1)
	default:
		fmt.Printf("unknown: the check of %d operations gave up after %v\n", len(ops), took)
		os.Exit(2)
	}
}
