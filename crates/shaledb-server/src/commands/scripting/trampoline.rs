//! `redis.call` and `redis.pcall` as C functions: Lua 5.1 lets a C function receive up to about 8,000
//! arguments (Redis's own tests call `redis.call` with 8,001), more than an mlua callback can take on its
//! stack. The C function gathers its arguments into one table and hands it, with their count, to the Rust
//! function stored in the registry; being a C function, a script's `return redis.call(...)` keeps the
//! script's frame (a Lua wrapper would be a tail call, losing the line errors name).
//!
//! The same holds for the libraries' functions: [`status_wrapper`] and [`plain_wrapper`] make C closures of
//! them, and raise their errors from the C frame as `luaL_error` / `luaL_argerror` do.

// Raw Lua API calls need `unsafe`; nothing else in this module does.
#![allow(unsafe_code)]

use mlua::{ffi, Function, Lua};
use std::os::raw::c_int;

/// Registry names of the Rust functions the C functions call, with `(table, count)`.
pub const CALL_KEY: &std::ffi::CStr = c"shaledb.rcall_table";
pub const PCALL_KEY: &std::ffi::CStr = c"shaledb.rpcall_table";

/// Moves the `n` arguments on the stack into a new table at index 1, then calls the registry's `key`
/// function with `(table, n)`: it answers `(true, reply)`, returned, or `(false, error)`, raised.
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
    ffi::lua_call(l, 2, 2);
    if ffi::lua_toboolean(l, -2) != 0 {
        return 1;
    }
    ffi::lua_error(l)
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

/// Status codes a library function wrapped by [`status_wrapper`] answers after `false`.
pub mod status {
    /// `false, POSITIONED, message`: raise `message` positioned at the caller, as `luaL_error`.
    pub const POSITIONED: i64 = 0;
    /// `false, RAW, value`: raise `value` as it is (no position), as `lua_error`.
    pub const RAW: i64 = 1;
    /// `false, ARGUMENT, n, message`: `bad argument #n to 'NAME' (message)`, as `luaL_argerror`, which
    /// names the function the way the caller called it (`'?'` under `pcall`).
    pub const ARGUMENT: i64 = 2;
}

/// Calls upvalue 1 with every argument and answers its results after the leading status: `true, values...`
/// returns the values, `false, code, ...` raises the error [`status`] describes. Raising from this C
/// function rather than from a Lua wrapper keeps Lua 5.1's positions: a C function called in tail position
/// (`return cjson.decode(x)`) keeps the script's frame, and level 1 is whoever called the library function
/// (the script's line, or nothing under `pcall`).
unsafe extern "C-unwind" fn status_call(l: *mut ffi::lua_State) -> c_int {
    // SAFETY (whole body): called by Lua as a C function with its own state; a C function has LUA_MINSTACK
    // free slots, and the few extra pushes below are checked first. Errors unwind through this frame, which
    // owns nothing to drop.
    unsafe {
        let n = ffi::lua_gettop(l);
        ffi::luaL_checkstack(l, 2, c"too many arguments".as_ptr());
        ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
        ffi::lua_insert(l, 1);
        ffi::lua_call(l, n, ffi::LUA_MULTRET);
        let results = ffi::lua_gettop(l);
        if results >= 1 && ffi::lua_toboolean(l, 1) != 0 {
            return results - 1;
        }
        ffi::luaL_checkstack(l, 4, c"too many results".as_ptr());
        let code = if results >= 2 { ffi::lua_tointeger(l, 2) as i64 } else { status::RAW };
        match code {
            status::POSITIONED => {
                ffi::luaL_where(l, 1);
                ffi::lua_pushvalue(l, 3);
                ffi::lua_concat(l, 2);
                ffi::lua_error(l)
            }
            status::ARGUMENT => {
                let narg = ffi::lua_tointeger(l, 3) as c_int;
                // The message stays on the stack (index 4) while luaL_argerror formats it.
                let msg = ffi::lua_tolstring(l, 4, std::ptr::null_mut());
                let msg = if msg.is_null() { c"".as_ptr() } else { msg };
                ffi::luaL_argerror(l, narg, msg)
            }
            _ => {
                ffi::lua_pushvalue(l, 3);
                ffi::lua_error(l)
            }
        }
    }
}

/// Calls upvalue 1 with every argument and returns all its results: a Lua function seen by scripts as a
/// C function (so a tail call to it keeps the script's frame, and errors it raises name the script's line).
unsafe extern "C-unwind" fn plain_call(l: *mut ffi::lua_State) -> c_int {
    // SAFETY: as in `status_call`.
    unsafe {
        let n = ffi::lua_gettop(l);
        ffi::luaL_checkstack(l, 1, c"too many arguments".as_ptr());
        ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
        ffi::lua_insert(l, 1);
        ffi::lua_call(l, n, ffi::LUA_MULTRET);
        ffi::lua_gettop(l)
    }
}

fn closure(lua: &Lua, f: Function, c: ffi::lua_CFunction) -> mlua::Result<Function> {
    // SAFETY: `exec_raw` pushes `f` (its one argument) and keeps what the closure leaves on the stack: the
    // C closure made of `c` with `f` as its upvalue.
    unsafe { lua.exec_raw::<Function>(f, |l| ffi::lua_pushcclosure(l, c, 1)) }
}

/// `f` (answering `true, values...` or `false, code, ...`, see [`status`]) as a C function.
pub fn status_wrapper(lua: &Lua, f: Function) -> mlua::Result<Function> {
    closure(lua, f, status_call)
}

/// `f` as a C function that returns what `f` returns.
pub fn plain_wrapper(lua: &Lua, f: Function) -> mlua::Result<Function> {
    closure(lua, f, plain_call)
}
