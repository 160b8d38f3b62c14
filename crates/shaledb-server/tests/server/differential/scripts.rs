//! The scripting family of the differential test: EVAL, EVALSHA, EVAL_RO and EVALSHA_RO of scripts drawn
//! from a catalogue (calls of commands that succeed and fail, `pcall`, every reply conversion, error and
//! status tables, cjson, bit, sha1hex, compile and runtime errors, a write followed by an error), SCRIPT
//! LOAD/EXISTS/FLUSH, and FUNCTION LOAD/DELETE/LIST with FCALL and FCALL_RO of two small libraries.

use super::{Cmp, Op, Rng, OTHER};

pub(crate) const SCRIPT_KEYS: &[&str] = &["sk0", "sk1"];

/// The scripts EVAL and EVALSHA run (EVAL_RO of one that writes is an error on both servers).
const SCRIPTS: &[&str] = &[
    "return redis.call('SET', KEYS[1], ARGV[1])",
    "return redis.call('GET', KEYS[1])",
    "return redis.call('INCRBY', KEYS[1], ARGV[1])",
    "return redis.pcall('INCRBY', KEYS[1], ARGV[1])",
    "local r = redis.pcall('INCRBY', KEYS[1], ARGV[1]) if type(r) == 'table' and r.err then return 'caught: ' .. \
     r.err end return r",
    "return redis.call('RPUSH', KEYS[1], ARGV[1], ARGV[2])",
    "return redis.call('LRANGE', KEYS[1], 0, -1)",
    "return {1, 2.9, 'three', {4, 'five', {}}, true, false, nil, 'after nil'}",
    "return {ok = 'fine'}",
    "return {err = 'My error'}",
    "return redis.error_reply('ERR custom ' .. tostring(ARGV[1]))",
    "return redis.status_reply('STATUS')",
    "return redis.call('NOSUCHCMD', KEYS[1])",
    "return nil + 1",
    "return redis.call('HSET', KEYS[1], 'f', ARGV[1])",
    "return redis.call('HGET', KEYS[1], 'f')",
    "return redis.call('EXISTS', KEYS[1], KEYS[2])",
    "return cjson.encode({1, 'x', true, {2}})",
    "local v = cjson.decode(ARGV[1]) if type(v) == 'table' then return #v end return v",
    "return redis.sha1hex(ARGV[1])",
    "return bit.bxor(tonumber(ARGV[1]) or 0, 5)",
    "return tostring(tonumber(ARGV[1]))",
    "redis.call('SET', KEYS[1], 'partial') return redis.call('INCR', KEYS[1])",
    "return redis.call('TYPE', KEYS[1])",
    "local t = redis.call('TYPE', KEYS[1]) return t.ok",
    "return redis.call('DEL', KEYS[1])",
    "return #KEYS + #ARGV",
    "return redis.call('SET', KEYS[1])",
    "return redis.call('ZADD', KEYS[1], ARGV[1], 'm')",
    "return redis.call('ZSCORE', KEYS[1], 'm')",
    "return {1.5, -0.9, 3.0}",
    "return (",
    "return redis.call('EVAL', 'return 1', 0)",
    "return redis.call('LPOP', KEYS[1], ARGV[1])",
    "return redis.call('MGET', KEYS[1], KEYS[2], 'nokey')",
    "redis.call('SET', KEYS[1], ARGV[1]) redis.call('EXPIRE', KEYS[1], 1000) return redis.call('TTL', KEYS[1]) > 0",
];

/// FUNCTION LOAD bodies: two versions of `lib1` (for REPLACE), `lib2`, a `lib2` that takes `f_set` from
/// `lib1`, and two that do not load.
const LIBRARIES: &[&str] = &[
    "#!lua name=lib1\nredis.register_function('f_set', function(keys, args) return redis.call('SET', keys[1], \
     args[1]) end)\nredis.register_function{function_name='f_get', callback=function(keys, args) return \
     redis.call('GET', keys[1]) end, flags={'no-writes'}}",
    "#!lua name=lib1\nredis.register_function('f_set', function(keys, args) return redis.call('INCR', keys[1]) \
     end)\nredis.register_function{function_name='f_get', callback=function(keys, args) return \
     redis.call('STRLEN', keys[1]) end, flags={'no-writes'}}",
    "#!lua name=lib2\nredis.register_function('f_count', function(keys, args) return #keys + #args end)",
    "#!lua name=lib2\nredis.register_function('f_set', function(keys, args) return 1 end)",
    "#!lua name=lib3\nreturn (",
    "#!lua\nredis.register_function('f_x', function() return 1 end)",
];

const FUNCTIONS: &[&str] = &["f_set", "f_get", "f_count", "f_none"];
const ARGS: &[&str] = &["1", "7", "-2", "abc", "", "[1,2,[3]]", "{\"a\":", "3.25", "9223372036854775807"];

fn sha(body: &str) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

/// `numkeys keys... args...`: usually one or two keys, sometimes a count that is wrong.
fn keys_and_args(r: &mut Rng, a: &mut Vec<String>) {
    let nk = r.range(0, 2) as usize;
    let nargs = r.range(0, 2) as usize;
    match r.below(20) {
        0 => a.push(r.pick(&["-1", "9", "x"]).into()),
        _ => a.push(nk.to_string()),
    }
    for _ in 0..nk {
        a.push(if r.chance(10) { OTHER.into() } else { r.pick(SCRIPT_KEYS).into() });
    }
    for _ in 0..nargs {
        a.push(r.pick(ARGS).into());
    }
}

pub(crate) fn gen_scripts(r: &mut Rng) -> Vec<Op> {
    let body = r.pick(SCRIPTS);
    let mut ops = Vec::new();
    let a = match r.below(20) {
        0..=6 => {
            let mut a = cmd![if r.chance(15) { "EVAL_RO" } else { "EVAL" }, body];
            keys_and_args(r, &mut a);
            a
        }
        7..=9 => {
            if r.chance(60) {
                ops.push(Op { conn: 0, args: cmd!["SCRIPT", "LOAD", body], cmp: Cmp::Exact });
            }
            let mut a = cmd![if r.chance(15) { "EVALSHA_RO" } else { "EVALSHA" }, sha(body)];
            keys_and_args(r, &mut a);
            a
        }
        10 => cmd!["SCRIPT", "EXISTS", sha(body), sha(r.pick(SCRIPTS))],
        11 if r.chance(20) => cmd!["SCRIPT", "FLUSH"],
        11 => cmd!["SCRIPT", "LOAD", body],
        12 | 13 => {
            let mut a = cmd!["FUNCTION", "LOAD"];
            if r.chance(50) {
                a.push("REPLACE".into());
            }
            a.push(r.pick(LIBRARIES).into());
            a
        }
        14..=16 => {
            let mut a = cmd![if r.chance(20) { "FCALL_RO" } else { "FCALL" }, r.pick(FUNCTIONS)];
            keys_and_args(r, &mut a);
            a
        }
        17 if r.chance(30) => cmd!["FUNCTION", "DELETE", r.pick(&["lib1", "lib2", "nolib"])],
        17 => cmd!["FUNCTION", "LIST", "LIBRARYNAME", "lib2", "WITHCODE"],
        18 => cmd!["GET", r.pick(SCRIPT_KEYS)],
        _ => cmd!["TYPE", r.pick(SCRIPT_KEYS)],
    };
    ops.push(Op { conn: 0, args: a, cmp: Cmp::Exact });
    ops
}
