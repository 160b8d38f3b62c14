//! `redis.call` and `redis.pcall` as C functions: Lua 5.1 lets a C function receive up to about 8,000
//! arguments (Redis's own tests call `redis.call` with 8,001), more than an mlua callback can take on its
//! stack. The C function gathers its arguments into one table and hands it, with their count, to the Rust
//! function stored in the registry; being a C function, a script's `return redis.call(...)` keeps the
//! script's frame (a Lua wrapper would be a tail call, losing the line errors name).

// Raw Lua API calls need `unsafe`; nothing else in this module does.
#![allow(unsafe_code)]

use mlua::{ffi, Function, Lua};
use std::os::raw::c_int;

/// Registry names of the Rust functions the C functions call, with `(table, count)`.
pub const CALL_KEY: &std::ffi::CStr = c"shaledb.rcall_table";
pub const PCALL_KEY: &std::ffi::CStr = c"shaledb.rpcall_table";

/// Moves the `n` arguments on the stack into a new table at index 1, then calls the registry's `key`
/// function with `(table, n)` and returns its one result.
///
/// SAFETY (for callers): `l` is the state Lua passed to a C function.
unsafe fn gather_and_call(l: *mut ffi::lua_State, key: &std::ffi::CStr) -> c_int {
    let n = ffi::lua_gettop(l);
    // A C function has LUA_MINSTACK (20) free slots; this needs at most 3 beyond its arguments.
    ffi::lua_createtable(l, n, 0);
    ffi::lua_insert(l, 1);
    let mut i = n;
    while i >= 1 {
        // Pops the top argument (argument i) into table[i].
        ffi::lua_rawseti(l, 1, i as ffi::lua_Integer);
        i -= 1;
    }
    ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, key.as_ptr());
    ffi::lua_insert(l, 1);
    ffi::lua_pushinteger(l, n as ffi::lua_Integer);
    // An error raised by the Rust function propagates from here through this frame, which holds nothing
    // to drop.
    ffi::lua_call(l, 2, 1);
    1
}

unsafe extern "C-unwind" fn call(l: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua as a C function, with its own state.
    unsafe { gather_and_call(l, CALL_KEY) }
}

unsafe extern "C-unwind" fn pcall(l: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua as a C function, with its own state.
    unsafe { gather_and_call(l, PCALL_KEY) }
}

/// The C functions `redis.call` and `redis.pcall`, for a VM whose registry holds [`CALL_KEY`] and
/// [`PCALL_KEY`].
pub fn functions(lua: &Lua) -> mlua::Result<(Function, Function)> {
    // SAFETY: both functions follow the C function protocol and touch only their own stack frame and the
    // registry.
    unsafe { Ok((lua.create_c_function(call)?, lua.create_c_function(pcall)?)) }
}
