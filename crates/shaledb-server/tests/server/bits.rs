//! Bit operations (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO), LCS, SUBSTR, the long
//! double of INCRBYFLOAT and HINCRBYFLOAT, and Redis's check order for GETEX: exact replies, a script
//! compared reply by reply with a real redis-server, and durability across a restart.

use crate::helpers::{connect, e, i, q, redis_or_skip, s, start_server, Client, Resp, NOT_INT, SYNTAX, WRONGTYPE};
use redis::Value;

const OFFSET_ERR: &str = "ERR bit offset is not an integer or out of range";
const TYPE_ERR: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

#[test]
fn setbit_getbit_bitcount_and_bitpos() {
    let (_dir, srv) = start_server(|_| {});
    let c = &mut connect(&srv);
    assert_eq!(i(c, &["SETBIT", "b", "7", "1"]), 0);
    assert_eq!(i(c, &["SETBIT", "b", "7", "1"]), 1);
    assert_eq!(s(c, &["GET", "b"]).as_deref(), Some("\u{1}"));
    assert_eq!(i(c, &["SETBIT", "b", "100", "1"]), 0);
    assert_eq!(i(c, &["STRLEN", "b"]), 13, "grown with zero bytes to hold bit 100");
    assert_eq!(i(c, &["GETBIT", "b", "100"]), 1);
    assert_eq!(i(c, &["GETBIT", "b", "99"]), 0);
    assert_eq!(i(c, &["GETBIT", "b", "4294967295"]), 0, "past the end: 0");
    assert_eq!(i(c, &["GETBIT", "missing", "3"]), 0);
    // SETBIT on a missing key creates it even when the bit is 0.
    assert_eq!(i(c, &["SETBIT", "z", "0", "0"]), 0);
    assert_eq!(i(c, &["EXISTS", "z"]), 1);
    // Errors, checked before the key's type.
    q::<()>(c, &["RPUSH", "list", "a"]);
    assert_eq!(e(c, &["SETBIT", "list", "-1", "1"]), OFFSET_ERR);
    assert_eq!(e(c, &["SETBIT", "list", "4294967296", "1"]), OFFSET_ERR);
    assert_eq!(e(c, &["SETBIT", "list", "0", "2"]), "ERR bit is not an integer or out of range");
    assert_eq!(e(c, &["SETBIT", "list", "0", "x"]), "ERR bit is not an integer or out of range");
    assert_eq!(e(c, &["SETBIT", "list", "0", "1"]), WRONGTYPE);
    assert_eq!(e(c, &["GETBIT", "list", "x"]), OFFSET_ERR);
    assert_eq!(e(c, &["GETBIT", "list", "0"]), WRONGTYPE);

    q::<()>(c, &["SET", "s", "foobar"]);
    assert_eq!(i(c, &["BITCOUNT", "s"]), 26);
    assert_eq!(i(c, &["BITCOUNT", "s", "0", "0"]), 4);
    assert_eq!(i(c, &["BITCOUNT", "s", "1", "1"]), 6);
    assert_eq!(i(c, &["BITCOUNT", "s", "1", "1", "BYTE"]), 6);
    assert_eq!(i(c, &["BITCOUNT", "s", "5", "30", "bit"]), 17);
    assert_eq!(i(c, &["BITCOUNT", "s", "-2", "-1"]), 7);
    assert_eq!(i(c, &["BITCOUNT", "s", "-1", "-2", "nonsense"]), 0, "an empty negative range answers first");
    assert_eq!(i(c, &["BITCOUNT", "missing", "x"]), 0, "a missing key answers before the arguments are read");
    assert_eq!(e(c, &["BITCOUNT", "s", "0"]), SYNTAX);
    assert_eq!(e(c, &["BITCOUNT", "s", "0", "1", "bits"]), SYNTAX);
    assert_eq!(e(c, &["BITCOUNT", "s", "a", "1"]), NOT_INT);
    assert_eq!(e(c, &["BITCOUNT", "list"]), WRONGTYPE);

    // p = ff f0 00
    for bit in 0..12 {
        i(c, &["SETBIT", "p", &bit.to_string(), "1"]);
    }
    i(c, &["SETBIT", "p", "23", "0"]);
    assert_eq!(i(c, &["BITPOS", "p", "0"]), 12);
    assert_eq!(i(c, &["BITPOS", "p", "1", "2"]), -1);
    assert_eq!(i(c, &["BITPOS", "p", "1", "0", "-1", "BIT"]), 0);
    assert_eq!(i(c, &["BITPOS", "p", "0", "0", "0"]), -1, "an end given: no padding");
    assert_eq!(i(c, &["BITPOS", "p", "0", "0"]), 12);
    q::<()>(c, &["DEL", "ones"]);
    q::<Vec<i64>>(c, &["BITFIELD", "ones", "SET", "u8", "0", "255"]);
    assert_eq!(i(c, &["BITPOS", "ones", "0"]), 8, "without an end the string is padded with clear bits");
    assert_eq!(i(c, &["BITPOS", "ones", "0", "0", "-1"]), -1);
    assert_eq!(i(c, &["BITPOS", "ones", "0", "3", "5", "BIT"]), -1);
    assert_eq!(i(c, &["BITPOS", "missing", "0"]), 0);
    assert_eq!(i(c, &["BITPOS", "missing", "1"]), -1);
    assert_eq!(i(c, &["BITPOS", "missing", "0", "x"]), 0, "a missing key answers before the range is read");
    assert_eq!(e(c, &["BITPOS", "p", "2"]), "ERR The bit argument must be 1 or 0.");
    assert_eq!(e(c, &["BITPOS", "p", "x"]), NOT_INT);
    assert_eq!(e(c, &["BITPOS", "p", "1", "0", "1", "bitt"]), SYNTAX);
    assert_eq!(e(c, &["BITPOS", "p", "1", "0", "1", "BIT", "x"]), SYNTAX);
    assert_eq!(e(c, &["BITPOS", "list", "1"]), WRONGTYPE);
}

#[test]
fn bitop_stores_or_deletes_its_destination() {
    let (_dir, srv) = start_server(|_| {});
    let c = &mut connect(&srv);
    q::<()>(c, &["SET", "a", "abc"]);
    q::<()>(c, &["SET", "b", "a"]);
    assert_eq!(i(c, &["BITOP", "AND", "d", "a", "b"]), 3);
    assert_eq!(q::<Vec<u8>>(c, &["GET", "d"]), b"a\0\0");
    assert_eq!(i(c, &["BITOP", "or", "d", "a", "b", "missing"]), 3);
    assert_eq!(s(c, &["GET", "d"]).as_deref(), Some("abc"));
    assert_eq!(i(c, &["BITOP", "XOR", "d", "a", "a"]), 3);
    assert_eq!(q::<Vec<u8>>(c, &["GET", "d"]), b"\0\0\0");
    assert_eq!(i(c, &["BITOP", "NOT", "d", "b"]), 1);
    assert_eq!(q::<Vec<u8>>(c, &["GET", "d"]), [!b'a']);
    // The destination loses its expiry; an empty result deletes it.
    q::<()>(c, &["EXPIRE", "d", "100"]);
    assert_eq!(i(c, &["BITOP", "OR", "d", "a"]), 3);
    assert_eq!(i(c, &["TTL", "d"]), -1);
    assert_eq!(i(c, &["BITOP", "AND", "d", "missing1", "missing2"]), 0);
    assert_eq!(i(c, &["EXISTS", "d"]), 0);
    q::<()>(c, &["RPUSH", "d", "x"]);
    assert_eq!(i(c, &["BITOP", "AND", "d", "missing1"]), 0, "a destination of another type is deleted too");
    assert_eq!(i(c, &["EXISTS", "d"]), 0);
    q::<()>(c, &["RPUSH", "list", "x"]);
    assert_eq!(e(c, &["BITOP", "AND", "d", "a", "list"]), WRONGTYPE);
    assert_eq!(e(c, &["BITOP", "NOT", "d", "a", "b"]), "ERR BITOP NOT must be called with a single source key.");
    assert_eq!(e(c, &["BITOP", "NAND", "d", "a"]), SYNTAX);
}

#[test]
fn bitfield_reads_writes_and_overflows() {
    let (_dir, srv) = start_server(|_| {});
    let c = &mut connect(&srv);
    let ints = |c: &mut redis::Connection, args: &[&str]| -> Vec<Option<i64>> { q(c, args) };
    assert_eq!(ints(c, &["BITFIELD", "f", "SET", "i8", "0", "-100", "GET", "i8", "0"]), [Some(0), Some(-100)]);
    assert_eq!(ints(c, &["BITFIELD", "f", "SET", "u8", "#1", "255", "GET", "u8", "8"]), [Some(0), Some(255)]);
    assert_eq!(ints(c, &["BITFIELD", "f", "INCRBY", "u8", "8", "10"]), [Some(9)], "wraps by default");
    assert_eq!(ints(c, &["BITFIELD", "f", "OVERFLOW", "SAT", "INCRBY", "u8", "8", "1000"]), [Some(255)]);
    assert_eq!(ints(c, &["BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u8", "8", "1"]), [None]);
    assert_eq!(ints(c, &["BITFIELD", "f", "OVERFLOW", "SAT", "INCRBY", "i8", "0", "-100"]), [Some(-128)]);
    assert_eq!(
        ints(c, &["BITFIELD", "f", "SET", "i64", "16", "-9223372036854775808", "INCRBY", "i64", "16", "-1"]),
        [Some(0), Some(9223372036854775807)]
    );
    assert_eq!(
        ints(c, &["BITFIELD", "f", "GET", "u63", "16", "GET", "i5", "1000"]),
        [Some(4611686018427387903), Some(0)]
    );
    assert_eq!(ints(c, &["BITFIELD", "f"]), Vec::<Option<i64>>::new());
    assert_eq!(ints(c, &["BITFIELD_RO", "f", "GET", "u8", "8"]), [Some(255)]);
    assert_eq!(ints(c, &["BITFIELD_RO", "missing", "GET", "u8", "8"]), [Some(0)]);
    assert_eq!(i(c, &["EXISTS", "missing"]), 0, "a read creates nothing");
    // OVERFLOW FAIL still creates and grows the string, as Redis does.
    assert_eq!(ints(c, &["BITFIELD", "g", "OVERFLOW", "FAIL", "SET", "u2", "#10", "9"]), [None]);
    assert_eq!(q::<Vec<u8>>(c, &["GET", "g"]), [0u8; 3]);
    // Errors: every operation is read before the key.
    q::<()>(c, &["RPUSH", "list", "x"]);
    assert_eq!(e(c, &["BITFIELD", "list", "GET", "u64", "0"]), TYPE_ERR);
    assert_eq!(e(c, &["BITFIELD", "list", "GET", "i65", "0"]), TYPE_ERR);
    assert_eq!(e(c, &["BITFIELD", "list", "GET", "u8", "#x"]), OFFSET_ERR);
    assert_eq!(e(c, &["BITFIELD", "list", "GET", "u8", "4294967296"]), OFFSET_ERR);
    assert_eq!(e(c, &["BITFIELD", "list", "OVERFLOW", "nope"]), "ERR Invalid OVERFLOW type specified");
    assert_eq!(e(c, &["BITFIELD", "list", "SET", "u8", "0"]), SYNTAX);
    assert_eq!(e(c, &["BITFIELD", "list", "SET", "u8", "0", "x"]), NOT_INT);
    assert_eq!(e(c, &["BITFIELD", "list", "GET", "u8", "0"]), WRONGTYPE);
    assert_eq!(e(c, &["BITFIELD", "list", "SET", "u8", "0", "1"]), WRONGTYPE);
    assert_eq!(e(c, &["BITFIELD_RO", "f", "SET", "u8", "0", "1"]), "ERR BITFIELD_RO only supports the GET subcommand");
    assert_eq!(e(c, &["BITFIELD_RO", "list", "GET", "u8", "0"]), WRONGTYPE);
}

#[test]
fn offsets_beyond_what_the_engine_holds_are_refused_before_allocating() {
    let (_dir, srv) = start_server(|_| {});
    let c = &mut connect(&srv);
    // 512 MB of bits is Redis's limit; the engine holds less in one entry: an error, nothing allocated or
    // written, and the server goes on.
    let msg = e(c, &["SETBIT", "big", "4294967295", "1"]);
    assert!(msg.starts_with("ERR "), "{msg}");
    assert_eq!(i(c, &["EXISTS", "big"]), 0);
    let msg = e(c, &["BITFIELD", "big", "SET", "i64", "4294967295", "1"]);
    assert!(msg.starts_with("ERR "), "{msg}");
    assert_eq!(i(c, &["EXISTS", "big"]), 0);
    assert_eq!(i(c, &["SETBIT", "big", "1000000", "1"]), 0);
    assert_eq!(i(c, &["STRLEN", "big"]), 125_001);
}

#[test]
fn lcs_and_substr() {
    let (_dir, srv) = start_server(|_| {});
    let c = &mut connect(&srv);
    q::<()>(c, &["MSET", "a", "ohmytext", "b", "mynewtext"]);
    assert_eq!(s(c, &["LCS", "a", "b"]).as_deref(), Some("mytext"));
    assert_eq!(i(c, &["LCS", "a", "b", "LEN"]), 6);
    assert_eq!(s(c, &["LCS", "a", "missing"]).as_deref(), Some(""));
    let v: Value = q(c, &["LCS", "a", "b", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"]);
    let int = |n: i64| Value::Int(n);
    let pair = |x: i64, y: i64| Value::Array(vec![int(x), int(y)]);
    assert_eq!(
        v,
        Value::Array(vec![
            Value::BulkString(b"matches".to_vec()),
            Value::Array(vec![Value::Array(vec![pair(4, 7), pair(5, 8), int(4)])]),
            Value::BulkString(b"len".to_vec()),
            int(6),
        ])
    );
    assert_eq!(
        e(c, &["LCS", "a", "b", "LEN", "IDX"]),
        "ERR If you want both the length and indexes, please just use IDX."
    );
    assert_eq!(e(c, &["LCS", "a", "b", "MINMATCHLEN"]), SYNTAX);
    assert_eq!(e(c, &["LCS", "a", "b", "MINMATCHLEN", "x"]), NOT_INT);
    q::<()>(c, &["RPUSH", "list", "x"]);
    assert_eq!(e(c, &["LCS", "a", "list", "nonsense"]), "ERR The specified keys must contain string values");

    assert_eq!(s(c, &["SUBSTR", "a", "2", "3"]).as_deref(), Some("my"));
    assert_eq!(s(c, &["SUBSTR", "a", "-4", "-1"]).as_deref(), Some("text"));
    assert_eq!(s(c, &["SUBSTR", "missing", "0", "1"]).as_deref(), Some(""));
    assert_eq!(e(c, &["SUBSTR", "a", "x", "1"]), NOT_INT);
    assert_eq!(e(c, &["SUBSTR", "list", "0", "1"]), WRONGTYPE);
}

#[test]
fn float_increments_use_long_double_like_redis() {
    let (_dir, srv) = start_server(|_| {});
    let c = &mut connect(&srv);
    q::<()>(c, &["SET", "k", "1000"]);
    assert_eq!(s(c, &["INCRBYFLOAT", "k", "0.1"]).as_deref(), Some("1000.09999999999999998"));
    assert_eq!(s(c, &["GET", "k"]).as_deref(), Some("1000.09999999999999998"));
    assert_eq!(s(c, &["INCRBYFLOAT", "tiny", "1e-320"]).as_deref(), Some("0"));
    q::<()>(c, &["SET", "hex", "0x10"]);
    assert_eq!(s(c, &["INCRBYFLOAT", "hex", "1"]).as_deref(), Some("17"));
    assert_eq!(e(c, &["INCRBYFLOAT", "k", "inf"]), "ERR increment would produce NaN or Infinity");
    assert_eq!(e(c, &["INCRBYFLOAT", "k", "nan"]), "ERR value is not a valid float");
    assert_eq!(e(c, &["INCRBYFLOAT", "k", "1e999999"]), "ERR value is not a valid float");
    q::<()>(c, &["HSET", "h", "f", "1000", "s", "abc"]);
    assert_eq!(s(c, &["HINCRBYFLOAT", "h", "f", "0.1"]).as_deref(), Some("1000.09999999999999998"));
    assert_eq!(s(c, &["HINCRBYFLOAT", "h", "new", "1e-320"]).as_deref(), Some("0"));
    assert_eq!(e(c, &["HINCRBYFLOAT", "h", "s", "1"]), "ERR hash value is not a float");
    assert_eq!(e(c, &["HINCRBYFLOAT", "k", "f", "inf"]), "ERR value is NaN or Infinity", "the increment first");
    assert_eq!(e(c, &["HINCRBYFLOAT", "k", "f", "1"]), WRONGTYPE);
}

#[test]
fn getex_looks_the_key_up_before_reading_the_expiry() {
    let (_dir, srv) = start_server(|_| {});
    let c = &mut connect(&srv);
    assert_eq!(s(c, &["GETEX", "missing", "EX", "0"]), None);
    assert_eq!(s(c, &["GETEX", "missing", "PX", "abc"]), None);
    assert_eq!(e(c, &["GETEX", "missing", "EX"]), SYNTAX, "the words are checked first");
    q::<()>(c, &["RPUSH", "list", "x"]);
    assert_eq!(e(c, &["GETEX", "list", "EX", "0"]), WRONGTYPE);
    q::<()>(c, &["SET", "k", "v"]);
    assert_eq!(e(c, &["GETEX", "k", "EX", "0"]), "ERR invalid expire time in 'getex' command");
    assert_eq!(e(c, &["GETEX", "k", "EX", "abc"]), NOT_INT);
    // SET reads all its words before the expiry's value.
    assert_eq!(e(c, &["SET", "k", "v", "EX", "abc", "NX", "XX"]), SYNTAX);
}

#[test]
fn bit_writes_and_float_increments_survive_a_restart() {
    let (dir, srv) = start_server(|_| {});
    {
        let c = &mut connect(&srv);
        i(c, &["SETBIT", "b", "9", "1"]);
        q::<Value>(c, &["BITFIELD", "f", "SET", "i16", "#1", "-2"]);
        q::<()>(c, &["SET", "x", "\u{7}"]);
        i(c, &["BITOP", "NOT", "n", "x"]);
        q::<()>(c, &["SET", "k", "1000"]);
        s(c, &["INCRBYFLOAT", "k", "0.1"]);
    }
    srv.shutdown().unwrap();
    let again = shaledb_server::RunningServer::start(shaledb_server::Config {
        dir: dir.path().join("db"),
        port: 0,
        bind: "127.0.0.1".into(),
        ..shaledb_server::Config::default()
    })
    .unwrap();
    let c = &mut connect(&again);
    assert_eq!(q::<Vec<u8>>(c, &["GET", "b"]), [0x00, 0x40]);
    assert_eq!(q::<Vec<Option<i64>>>(c, &["BITFIELD_RO", "f", "GET", "i16", "16"]), [Some(-2)]);
    assert_eq!(q::<Vec<u8>>(c, &["GET", "n"]), [0xf8]);
    assert_eq!(s(c, &["GET", "k"]).as_deref(), Some("1000.09999999999999998"));
    again.shutdown().unwrap();
}

/// The same script on redis-server and on shaledb, every reply compared exactly (RESP2 and RESP3 for the
/// replies whose shape differs).
#[test]
fn bit_commands_answer_exactly_as_redis_does() {
    let Some(redis) = redis_or_skip() else { return };
    let (_dir, srv) = start_server(|_| {});
    let mut theirs = Client::connect(redis.addr);
    let mut ours = Client::connect(srv.addr());
    let script: &[&[&str]] = &[
        &["RPUSH", "list", "x"],
        &["SETBIT", "b", "0", "1"],
        &["SETBIT", "b", "33", "1"],
        &["SETBIT", "b", "33", "0"],
        &["SETBIT", "b", "-1", "1"],
        &["SETBIT", "b", "4294967296", "1"],
        &["SETBIT", "b", "1", "-1"],
        &["SETBIT", "list", "1", "1"],
        &["GETBIT", "b", "0"],
        &["GETBIT", "b", "4294967295"],
        &["GETBIT", "list", "0"],
        &["SET", "s", "foobar"],
        &["BITCOUNT", "s"],
        &["BITCOUNT", "s", "1", "3"],
        &["BITCOUNT", "s", "-3", "-1", "BYTE"],
        &["BITCOUNT", "s", "3", "41", "BIT"],
        &["BITCOUNT", "s", "-10", "-3", "bit"],
        &["BITCOUNT", "s", "5", "2"],
        &["BITCOUNT", "s", "1"],
        &["BITCOUNT", "s", "1", "2", "3"],
        &["BITCOUNT", "nokey", "a", "b", "c"],
        &["BITPOS", "s", "1"],
        &["BITPOS", "s", "0"],
        &["BITPOS", "s", "0", "2"],
        &["BITPOS", "s", "1", "2", "-1"],
        &["BITPOS", "s", "0", "7", "15", "BIT"],
        &["BITPOS", "s", "1", "7", "15", "BIT"],
        &["BITPOS", "s", "1", "-7", "-1", "BIT"],
        &["BITPOS", "s", "0", "100"],
        &["BITPOS", "s", "3"],
        &["BITPOS", "nokey", "0", "x"],
        &["BITPOS", "s", "1", "0", "1", "BITS"],
        &["BITPOS", "s", "1", "0", "1", "BIT", "extra"],
        &["SET", "ff", "\u{7f}\u{7f}"],
        &["BITPOS", "ff", "0"],
        &["BITPOS", "ff", "0", "0", "-1"],
        &["BITPOS", "ff", "1", "1"],
        &["BITOP", "AND", "d", "s", "b"],
        &["GET", "d"],
        &["BITOP", "OR", "d", "s", "b", "nokey"],
        &["GET", "d"],
        &["BITOP", "XOR", "d", "s", "ff"],
        &["GET", "d"],
        &["BITOP", "NOT", "d", "ff"],
        &["GET", "d"],
        &["BITOP", "NOT", "d", "ff", "s"],
        &["BITOP", "AND", "d", "nokey"],
        &["EXISTS", "d"],
        &["BITOP", "AND", "d", "list"],
        &["BITOP", "FOO", "d", "s"],
        &["BITFIELD", "bf", "SET", "u4", "0", "17", "GET", "u4", "0", "INCRBY", "i4", "4", "-20"],
        &[
            "BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "i4", "4", "-20", "OVERFLOW", "FAIL", "INCRBY", "u4", "0",
            "100",
        ],
        &["BITFIELD", "bf", "SET", "i64", "#2", "-1", "GET", "u63", "#2", "GET", "i64", "#2", "GET", "u1", "1000"],
        &["BITFIELD", "bf", "OVERFLOW", "WRAP", "INCRBY", "i64", "#2", "-9223372036854775808"],
        &["BITFIELD", "bf", "GET", "u64", "0"],
        &["BITFIELD", "bf", "GET", "x8", "0"],
        &["BITFIELD", "bf", "GET", "u8", "#-1"],
        &["BITFIELD", "bf", "OVERFLOW", "X"],
        &["BITFIELD", "bf", "INCRBY", "u8", "0"],
        &["BITFIELD", "bf", "FOO"],
        &["BITFIELD", "bf"],
        &["BITFIELD", "list"],
        &["BITFIELD_RO", "bf", "GET", "u8", "0", "GET", "i3", "5"],
        &["BITFIELD_RO", "bf", "SET", "u8", "0", "1"],
        &["GET", "bf"],
        &["SET", "la", "ohmytext"],
        &["SET", "lb", "mynewtext"],
        &["LCS", "la", "lb"],
        &["LCS", "la", "lb", "LEN"],
        &["LCS", "la", "lb", "IDX"],
        &["LCS", "la", "lb", "IDX", "WITHMATCHLEN", "MINMATCHLEN", "-1"],
        &["LCS", "la", "lb", "IDX", "LEN"],
        &["LCS", "la", "nokey", "IDX"],
        &["LCS", "la", "list"],
        &["LCS", "la", "lb", "WHAT"],
        &["SUBSTR", "la", "1", "-2"],
        &["SUBSTR", "la", "-1", "-5"],
        &["SET", "k", "1000"],
        &["INCRBYFLOAT", "k", "0.1"],
        &["INCRBYFLOAT", "k", "1.5e3"],
        &["INCRBYFLOAT", "k", "-0x1p-3"],
        &["INCRBYFLOAT", "k", " 1"],
        &["INCRBYFLOAT", "k", "-inf"],
        &["INCRBYFLOAT", "tiny", "1e-320"],
        &["INCRBYFLOAT", "list", "1"],
        &["SET", "k", "0x10"],
        &["INCRBYFLOAT", "k", "1"],
        &["HINCRBYFLOAT", "h", "f", "0.3"],
        &["HINCRBYFLOAT", "h", "f", "0.3"],
        &["HINCRBYFLOAT", "h", "f", "-inf"],
        &["HINCRBYFLOAT", "list", "f", "1"],
        &["GETEX", "nokey", "EX", "0"],
        &["GETEX", "list", "EX", "0"],
        &["GETEX", "la", "EX", "0"],
        &["GETEX", "la", "EX", "1", "PX", "1"],
    ];
    for proto in ["2", "3"] {
        let hello = ["HELLO", proto];
        theirs.cmd(&hello);
        ours.cmd(&hello);
        theirs.cmd(&["FLUSHALL"]);
        ours.cmd(&["FLUSHALL"]);
        for args in script {
            let want = theirs.cmd(args);
            let got = ours.cmd(args);
            assert_eq!(got, want, "RESP{proto}: {args:?}");
        }
    }
}

#[test]
fn bit_writes_are_atomic_in_multi() {
    let (_dir, srv) = start_server(|_| {});
    let mut c = Client::connect(srv.addr());
    assert_eq!(c.cmd(&["MULTI"]), Resp::Simple("OK".into()));
    c.cmd(&["SETBIT", "m", "3", "1"]);
    c.cmd(&["BITFIELD", "m", "INCRBY", "u8", "0", "1"]);
    c.cmd(&["BITOP", "NOT", "n", "m"]);
    c.cmd(&["BITCOUNT", "n"]);
    let replies = c.cmd(&["EXEC"]).array();
    assert_eq!(
        replies,
        [Resp::Int(0), Resp::Array(vec![Resp::Int(17)]), Resp::Int(1), Resp::Int(6)],
        "0x10 + 1 = 0x11; NOT 0x11 = 0xee has 6 bits set"
    );
}
