package store

import lua "github.com/yuin/gopher-lua"

// miniredis builds a gopher-lua state for every script it runs (EVAL,
// EVALSHA) and drops it after, sized by gopher-lua's package defaults: a
// data stack ("registry") of 5 120 values, 80 KiB, and a call stack of 256
// frames, 20 KiB, each allocated whole and fixed (miniredis turns growth
// off). The store's scripts need a small part of that: every test of the
// store passes on the embedded store at gopher-lua's least, 128 values and
// 8 frames. These sizes keep eight times that, and cut the garbage of a
// script call from about 210 to 130 KiB (docs/benchmarks.md, "Memory with
// the embedded store, second pass"). A script that needed more would fail
// with gopher-lua's "stack overflow" or "registry overflow", in the store's
// tests first.
//
// They are gopher-lua's package variables, set once for the process when
// the store package loads: nothing else in the gateway runs Lua, and with
// a real Redis nothing runs it in-process at all.
const (
	embeddedLuaRegistrySize  = 1024
	embeddedLuaCallStackSize = 64
)

func init() {
	lua.RegistrySize = embeddedLuaRegistrySize
	lua.CallStackSize = embeddedLuaCallStackSize
}
