package main

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/anishathalye/porcupine"
)

// An input: one Redis command on one key.
type input struct {
	op    string // "get", "set", "append", "incr", "del"
	key   string
	value string // set and append: the argument
}

// An output: what the server answered. unknown marks an operation whose reply never came (a timeout or a
// dropped connection): it may have taken effect or not, and its call is all that is known.
type output struct {
	unknown bool
	found   bool   // get: the key existed
	value   string // get: the value
	number  int64  // append: the new length; incr: the new value; del: keys removed
}

// state is the value of one key (the model is partitioned by key): exists and its bytes.
type state struct {
	exists bool
	value  string
}

// kvModel is Redis's semantics for strings under GET, SET, APPEND, INCR and DEL of one key at a time.
var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(input).key
			byKey[k] = append(byKey[k], op)
		}
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, byKey[k])
		}
		return parts
	},
	Init: func() interface{} { return state{} },
	Step: func(s, in, out interface{}) (bool, interface{}) {
		return step(s.(state), in.(input), out.(output))
	},
	Equal: func(a, b interface{}) bool { return a.(state) == b.(state) },
	DescribeOperation: func(in, out interface{}) string {
		i, o := in.(input), out.(output)
		var res string
		switch {
		case o.unknown:
			res = "?"
		case i.op == "get" && !o.found:
			res = "nil"
		case i.op == "get":
			res = strconv.Quote(o.value)
		case i.op == "set":
			res = "OK"
		default:
			res = strconv.FormatInt(o.number, 10)
		}
		if i.op == "get" || i.op == "incr" || i.op == "del" {
			return fmt.Sprintf("%s(%s) -> %s", i.op, i.key, res)
		}
		return fmt.Sprintf("%s(%s, %q) -> %s", i.op, i.key, i.value, res)
	},
	DescribeState: func(s interface{}) string {
		st := s.(state)
		if !st.exists {
			return "nil"
		}
		return strconv.Quote(st.value)
	},
}

// step applies one operation to one key's state: whether the server's answer is possible from that state,
// and the state after it. An unknown answer is possible from any state (the checker may also place the
// operation after every other, where it changes nothing that was observed).
func step(s state, in input, out output) (bool, interface{}) {
	switch in.op {
	case "get":
		if out.unknown {
			return true, s
		}
		return out.found == s.exists && (!s.exists || out.value == s.value), s
	case "set":
		return true, state{exists: true, value: in.value}
	case "append":
		next := state{exists: true, value: s.value + in.value}
		return out.unknown || out.number == int64(len(next.value)), next
	case "incr":
		cur := int64(0)
		if s.exists {
			n, err := strconv.ParseInt(s.value, 10, 64)
			if err != nil {
				// INCR of a non-integer is an error and changes nothing: the recorder never sends one.
				return false, s
			}
			cur = n
		}
		next := state{exists: true, value: strconv.FormatInt(cur+1, 10)}
		return out.unknown || out.number == cur+1, next
	case "del":
		removed := int64(0)
		if s.exists {
			removed = 1
		}
		return out.unknown || out.number == removed, state{}
	}
	return false, s
}
