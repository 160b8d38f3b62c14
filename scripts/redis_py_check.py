#!/usr/bin/env python3
"""redis-py against a running `shaledb server` (issue 11's client check, run by scripts/ci-server-smoke.sh).

    python3 scripts/redis_py_check.py --port P [--host 127.0.0.1] [--allow-missing]

Covers HELLO 3 (protocol=3 when the installed redis-py has it), pipelines of 1000 commands, the error paths of
transactions (a queued unknown command aborts EXEC, EXEC/DISCARD without MULTI, a runtime error inside EXEC),
a transaction's happy path, SCAN / scan_iter with MATCH and COUNT over 1000 keys, KEYS, expiry (SET EX/PX,
EXPIRE, TTL/PTTL, PERSIST, a key expiring), INCR and friends, MSET/MGET, SELECT isolation, INFO, CONFIG GET,
CLIENT SETNAME/GETNAME/LIST/ID, DBSIZE and FLUSHDB, and the error texts clients rely on. Every check asserts;
the first failure prints what was expected and what came back, and the script exits 1.

--allow-missing: a check whose command the server answers with "unknown command" is printed as SKIP instead of
failing (for a server that does not have every command yet; CI runs without it).
Only loopback addresses are accepted.
"""

import argparse
import ipaddress
import sys
import time

try:
    import redis
except ImportError:
    print("redis_py_check: SKIP: python3 cannot import redis (pip install redis)")
    sys.exit(0)


class Skip(Exception):
    pass


def is_unknown_command(err):
    return str(err).lower().startswith("unknown command")


def expect_eq(what, got, want):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, expected {want!r}")


def expect_true(what, cond, detail=""):
    if not cond:
        raise AssertionError(f"{what}{': ' + detail if detail else ''}")


def expect_error(what, fn, cls, text):
    """fn() must raise `cls` whose message contains `text` (case-insensitive)."""
    try:
        got = fn()
    except cls as e:
        if text.lower() not in str(e).lower():
            if is_unknown_command(e):
                raise  # the command itself is missing: Checker.run decides (SKIP with --allow-missing)
            raise AssertionError(f"{what}: error {str(e)!r} does not contain {text!r}")
        return e
    except redis.RedisError as e:
        if is_unknown_command(e):
            raise
        raise AssertionError(f"{what}: raised {type(e).__name__}({str(e)!r}), expected {cls.__name__}") from e
    raise AssertionError(f"{what}: returned {got!r}, expected {cls.__name__} containing {text!r}")


class Checker:
    def __init__(self, host, port, allow_missing):
        self.host = host
        self.port = port
        self.allow_missing = allow_missing
        self.passed = 0
        self.skipped = []

    def client(self, **kw):
        kw.setdefault("decode_responses", True)
        kw.setdefault("socket_timeout", 30)
        kw.setdefault("socket_connect_timeout", 10)
        return redis.Redis(host=self.host, port=self.port, **kw)

    def run(self, name, fn):
        try:
            fn()
        except Skip as e:
            self.skipped.append(name)
            print(f"redis_py_check: SKIP {name}: {e}")
            return
        except redis.ResponseError as e:
            if self.allow_missing and is_unknown_command(e):
                self.skipped.append(name)
                print(f"redis_py_check: SKIP {name}: the server does not know the command yet ({e})")
                return
            self.fail(name, f"{type(e).__name__}: {e}")
        except AssertionError as e:
            self.fail(name, str(e))
        except Exception as e:  # noqa: BLE001 - any other error is a failure with its type shown
            self.fail(name, f"{type(e).__name__}: {e}")
        self.passed += 1
        print(f"redis_py_check: ok {name}")

    def fail(self, name, msg):
        print(f"redis_py_check: FAIL {name}: {msg}", file=sys.stderr)
        sys.exit(1)

    # ---- connection -------------------------------------------------------------------------------------

    def check_ping_and_errors(self):
        r = self.client()
        expect_true("PING", r.ping() is True)
        expect_eq("ECHO", r.echo("hi there"), "hi there")
        e = expect_error("unknown command", lambda: r.execute_command("NOSUCHCMD", "a", "b"),
                         redis.ResponseError, "unknown command")
        expect_eq("unknown command text", str(e), "unknown command 'NOSUCHCMD', with args beginning with: 'a' 'b' ")
        e = expect_error("GET without key", lambda: r.execute_command("GET"), redis.ResponseError, "")
        expect_eq("wrong arity text", str(e), "wrong number of arguments for 'get' command")

    def check_hello3(self):
        r2 = self.client(single_connection_client=True)
        hello2 = r2.execute_command("HELLO", "2")
        # RESP2: a flat array of field, value pairs; redis-py may turn it into a dict.
        fields = hello2 if isinstance(hello2, dict) else dict(zip(hello2[::2], hello2[1::2]))
        expect_eq("HELLO 2 proto", int(fields.get("proto")), 2)
        expect_eq("HELLO 2 role", fields.get("role"), "master")
        try:
            r3 = self.client(protocol=3, single_connection_client=True)
        except TypeError:
            raise Skip(f"redis-py {redis.__version__} has no protocol=3 (RESP3 came in redis-py 5)")
        expect_true("RESP3 PING", r3.ping() is True)
        hello3 = r3.execute_command("HELLO", "3")
        expect_true("HELLO 3 is a map", isinstance(hello3, dict), f"got {hello3!r}")
        expect_eq("HELLO 3 proto", int(hello3.get("proto")), 3)
        expect_eq("HELLO 3 server", hello3.get("server") in ("redis", "shaledb"), True)
        expect_true("RESP3 SET", r3.set("py:resp3", "v3") is True)
        expect_eq("RESP3 GET", r3.get("py:resp3"), "v3")
        expect_eq("RESP3 GET missing", r3.get("py:resp3:missing"), None)
        e = expect_error("HELLO 4", lambda: r3.execute_command("HELLO", "4"), redis.ResponseError, "NOPROTO")
        del e
        r2.close()
        r3.close()

    # ---- pipelines and transactions ----------------------------------------------------------------------

    def check_pipeline(self):
        r = self.client()
        p = r.pipeline(transaction=False)
        for i in range(1000):
            p.set(f"py:pipe:{i}", f"value-{i}")
        res = p.execute()
        expect_eq("1000 pipelined SET replies", len(res), 1000)
        expect_true("pipelined SETs all OK", all(x is True for x in res), f"first replies {res[:5]!r}")
        p = r.pipeline(transaction=False)
        for i in range(1000):
            p.get(f"py:pipe:{i}")
        res = p.execute()
        expect_eq("1000 pipelined GETs", res, [f"value-{i}" for i in range(1000)])
        # A pipeline holding an error: the other replies still come back, in order.
        p = r.pipeline(transaction=False)
        p.set("py:pipe:e", "1")
        p.execute_command("NOSUCHCMD")
        p.get("py:pipe:e")
        res = p.execute(raise_on_error=False)
        expect_eq("pipeline with an error: reply count", len(res), 3)
        expect_true("pipeline with an error: SET", res[0] is True, repr(res))
        expect_true("pipeline with an error: the error", isinstance(res[1], redis.ResponseError), repr(res))
        expect_eq("pipeline with an error: GET", res[2], "1")

    def check_transaction_errors(self):
        r = self.client(single_connection_client=True)
        try:
            conn = r.connection_pool.get_connection()
        except TypeError:  # redis-py before 5.3 wants a command name
            conn = r.connection_pool.get_connection("MULTI")

        def raw(*args):
            # Bypasses redis-py's reply callbacks (which would turn QUEUED into False), errors still raise.
            conn.send_command(*args)
            return conn.read_response()

        expect_error("EXEC without MULTI", lambda: raw("EXEC"), redis.ResponseError, "EXEC without MULTI")
        expect_error("DISCARD without MULTI", lambda: raw("DISCARD"), redis.ResponseError, "DISCARD without MULTI")
        # A queued unknown command: the command is refused at once and EXEC aborts the whole transaction.
        r.delete("py:tx:aborted")
        expect_eq("MULTI", raw("MULTI"), "OK")
        expect_eq("SET queued", raw("SET", "py:tx:aborted", "1"), "QUEUED")
        expect_error("queued unknown command", lambda: raw("NOSUCHCMD", "x"), redis.ResponseError, "unknown command")
        expect_error("EXEC after a queueing error", lambda: raw("EXEC"), redis.exceptions.ExecAbortError,
                     "Transaction discarded")
        expect_eq("aborted transaction wrote nothing", r.get("py:tx:aborted"), None)
        # Wrong arity while queueing aborts too.
        expect_eq("MULTI", raw("MULTI"), "OK")
        expect_error("queued GET without key", lambda: raw("GET"), redis.ResponseError, "wrong number of arguments")
        expect_error("EXEC after a wrong arity", lambda: raw("EXEC"), redis.exceptions.ExecAbortError,
                     "Transaction discarded")
        # MULTI inside MULTI is an error that does not abort; DISCARD drops the queue.
        expect_eq("MULTI", raw("MULTI"), "OK")
        expect_error("nested MULTI", lambda: raw("MULTI"), redis.ResponseError, "MULTI calls can not be nested")
        expect_eq("SET queued", raw("SET", "py:tx:discarded", "1"), "QUEUED")
        expect_eq("DISCARD", raw("DISCARD"), "OK")
        expect_eq("discarded transaction wrote nothing", r.get("py:tx:discarded"), None)
        # An empty transaction answers an empty array.
        expect_eq("MULTI", raw("MULTI"), "OK")
        expect_eq("empty EXEC", raw("EXEC"), [])
        # Through redis-py's pipeline: the queued error surfaces and nothing is written.
        p = r.pipeline(transaction=True)
        p.set("py:tx:pipe-aborted", "1")
        p.execute_command("NOSUCHCMD")
        expect_error("pipeline(transaction=True) with an unknown command", p.execute, redis.ResponseError,
                     "unknown command")
        expect_eq("aborted pipeline wrote nothing", r.get("py:tx:pipe-aborted"), None)
        # A runtime error inside EXEC: that command fails, the others run (Redis has no rollback).
        p = r.pipeline(transaction=True)
        p.set("py:tx:str", "not a number")
        p.incr("py:tx:str")
        p.set("py:tx:after", "ran")
        res = p.execute(raise_on_error=False)
        expect_eq("EXEC with a runtime error: reply count", len(res), 3)
        expect_true("EXEC: SET", res[0] is True, repr(res))
        expect_true("EXEC: INCR on a string fails", isinstance(res[1], redis.ResponseError)
                    and "not an integer" in str(res[1]), repr(res))
        expect_eq("EXEC: the command after the error ran", r.get("py:tx:after"), "ran")
        r.close()

    def check_transaction_happy(self):
        r = self.client()
        r.delete("py:tx:ctr")
        p = r.pipeline(transaction=True)
        p.incr("py:tx:ctr")
        p.incrby("py:tx:ctr", 41)
        p.set("py:tx:k", "v")
        p.get("py:tx:k")
        p.get("py:tx:ctr")
        expect_eq("MULTI/EXEC replies", p.execute(), [1, 42, True, "v", "42"])

    # ---- keys -------------------------------------------------------------------------------------------

    def check_scan(self):
        r = self.client(db=2)
        r.flushdb()
        want = {f"py:scan:{i:04}" for i in range(1000)}
        r.mset({k: "x" for k in want})
        r.mset({f"py:other:{i}": "y" for i in range(100)})
        expect_eq("DBSIZE before SCAN", r.dbsize(), 1100)
        got = set(r.scan_iter(match="py:scan:*", count=100))
        expect_eq("scan_iter(match, count=100) found", len(got), 1000)
        expect_true("scan_iter(match) finds exactly the keys", got == want,
                    f"missing {sorted(want - got)[:3]}, extra {sorted(got - want)[:3]}")
        # By hand, with a small COUNT: the cursor comes back to 0 in a bounded number of calls.
        cursor, seen, calls = 0, set(), 0
        while True:
            cursor, keys = r.scan(cursor=cursor, match="py:scan:00*", count=7)
            seen.update(keys)
            calls += 1
            expect_true("SCAN ends", calls < 5000, f"{calls} calls and the cursor is {cursor}")
            if int(cursor) == 0:
                break
        expect_eq("SCAN MATCH py:scan:00* COUNT 7", seen, {k for k in want if k.startswith("py:scan:00")})
        everything = set(r.scan_iter(count=1000))
        expect_eq("SCAN without MATCH", len(everything), 1100)
        typed = set(r.scan_iter(match="py:other:*", _type="string"))
        expect_eq("SCAN TYPE string", len(typed), 100)
        expect_eq("KEYS py:other:1?", sorted(r.keys("py:other:1?")), sorted(f"py:other:{i}" for i in range(10, 20)))
        expect_error("SCAN with a bad cursor", lambda: r.execute_command("SCAN", "notanumber"), redis.ResponseError,
                     "invalid cursor")
        r.flushdb()

    def check_keys_commands(self):
        r = self.client()
        r.mset({"py:del:a": "1", "py:del:b": "2"})
        expect_eq("EXISTS two keys and a missing one", r.exists("py:del:a", "py:del:b", "py:del:none"), 2)
        expect_eq("DEL", r.delete("py:del:a", "py:del:none"), 1)
        expect_eq("EXISTS after DEL", r.exists("py:del:a"), 0)
        expect_eq("TYPE string", r.type("py:del:b"), "string")
        expect_eq("TYPE none", r.type("py:del:a"), "none")

    def check_expiry(self):
        r = self.client()
        expect_eq("TTL of a missing key", r.ttl("py:exp:missing"), -2)
        expect_true("SET EX", r.set("py:exp:ex", "v", ex=100) is True)
        ttl = r.ttl("py:exp:ex")
        expect_true("TTL after SET EX 100", 0 < ttl <= 100, f"ttl {ttl}")
        expect_true("SET PX", r.set("py:exp:px", "v", px=100000) is True)
        pttl = r.pttl("py:exp:px")
        expect_true("PTTL after SET PX 100000", 0 < pttl <= 100000, f"pttl {pttl}")
        r.set("py:exp:plain", "v")
        expect_eq("TTL without expiry", r.ttl("py:exp:plain"), -1)
        expect_true("EXPIRE", r.expire("py:exp:plain", 50) is True)
        ttl = r.ttl("py:exp:plain")
        expect_true("TTL after EXPIRE 50", 0 < ttl <= 50, f"ttl {ttl}")
        expect_true("PERSIST", r.persist("py:exp:plain") is True)
        expect_eq("TTL after PERSIST", r.ttl("py:exp:plain"), -1)
        expect_true("EXPIRE on a missing key", r.expire("py:exp:missing", 10) is False)
        r.set("py:exp:short", "v", px=150)
        expect_eq("GET before expiry", r.get("py:exp:short"), "v")
        time.sleep(0.4)
        expect_eq("GET after expiry", r.get("py:exp:short"), None)
        expect_eq("EXISTS after expiry", r.exists("py:exp:short"), 0)
        expect_eq("TTL after expiry", r.ttl("py:exp:short"), -2)
        # SET without KEEPTTL clears the expiry; with KEEPTTL keeps it.
        r.set("py:exp:keep", "v", ex=100)
        r.set("py:exp:keep", "w", keepttl=True)
        expect_true("SET KEEPTTL keeps the TTL", r.ttl("py:exp:keep") > 0)
        r.set("py:exp:keep", "x")
        expect_eq("SET clears the TTL", r.ttl("py:exp:keep"), -1)
        expect_error("SET EX 0", lambda: r.set("py:exp:bad", "v", ex=0), redis.ResponseError, "invalid expire time")

    # ---- strings ----------------------------------------------------------------------------------------

    def check_incr(self):
        r = self.client()
        r.delete("py:incr")
        expect_eq("INCR of a new key", r.incr("py:incr"), 1)
        expect_eq("INCRBY 10", r.incrby("py:incr", 10), 11)
        expect_eq("DECR", r.decr("py:incr"), 10)
        expect_eq("DECRBY 20", r.decrby("py:incr", 20), -10)
        expect_eq("GET of a counter", r.get("py:incr"), "-10")
        r.set("py:incr:s", "abc")
        expect_error("INCR of a non-integer", lambda: r.incr("py:incr:s"), redis.ResponseError,
                     "value is not an integer or out of range")
        r.set("py:incr:max", str(2**63 - 1))
        expect_error("INCR past i64::MAX", lambda: r.incr("py:incr:max"), redis.ResponseError,
                     "increment or decrement would overflow")
        r.delete("py:incr:f")
        expect_eq("INCRBYFLOAT", float(r.incrbyfloat("py:incr:f", 1.5)), 1.5)

    def check_mset_mget(self):
        r = self.client()
        kv = {f"py:m:{i}": f"v{i}" for i in range(100)}
        expect_true("MSET", r.mset(kv) is True)
        keys = list(kv) + ["py:m:missing"]
        expect_eq("MGET", r.mget(keys), list(kv.values()) + [None])
        expect_error("MSET with an odd argument count", lambda: r.execute_command("MSET", "a", "b", "c"),
                     redis.ResponseError, "wrong number of arguments")

    def check_select(self):
        r0 = self.client(db=0)
        r1 = self.client(db=1)
        r0.set("py:sel", "zero")
        r1.set("py:sel", "one")
        expect_eq("db 0 value", r0.get("py:sel"), "zero")
        expect_eq("db 1 value", r1.get("py:sel"), "one")
        r1.delete("py:sel")
        expect_eq("DEL in db 1 leaves db 0", r0.get("py:sel"), "zero")
        r1.set("py:sel:only1", "x")
        expect_eq("a db 1 key is absent in db 0", r0.get("py:sel:only1"), None)
        r = self.client(single_connection_client=True)
        expect_error("SELECT 16", lambda: r.execute_command("SELECT", "16"), redis.ResponseError,
                     "DB index is out of range")
        expect_error("SELECT x", lambda: r.execute_command("SELECT", "x"), redis.ResponseError, "")
        r.close()

    # ---- server -----------------------------------------------------------------------------------------

    def check_info(self):
        r = self.client()
        info = r.info()
        expect_true("INFO has redis_version", "redis_version" in info, f"fields {sorted(info)[:20]}")
        expect_eq("INFO loading", info.get("loading"), 0)
        expect_true("INFO connected_clients", int(info.get("connected_clients", 0)) >= 1)
        expect_eq("INFO replication role", r.info("replication").get("role"), "master")
        persistence = r.info("persistence")
        expect_true("INFO persistence has loading", "loading" in persistence, repr(persistence))
        for section in ("server", "clients", "memory", "stats", "keyspace"):
            r.info(section)  # each answers (an empty keyspace section is fine)

    def check_config(self):
        r = self.client()
        cfg = r.config_get("*")
        for name in ("save", "appendonly", "appendfsync", "maxmemory", "databases"):
            expect_true(f"CONFIG GET * has {name}", name in cfg, f"names {sorted(cfg)[:30]}")
        expect_true("appendfsync value", cfg["appendfsync"] in ("always", "everysec", "no"), repr(cfg["appendfsync"]))
        expect_eq("databases", cfg["databases"], "16")
        expect_eq("CONFIG GET appendfsync", set(r.config_get("appendfsync")), {"appendfsync"})
        expect_eq("CONFIG GET of an unknown name", r.config_get("no-such-parameter"), {})

    def check_client(self):
        r = self.client(single_connection_client=True)
        expect_true("CLIENT SETNAME", r.client_setname("py-check") is True)
        expect_eq("CLIENT GETNAME", r.client_getname(), "py-check")
        cid = r.client_id()
        expect_true("CLIENT ID", isinstance(cid, int) and cid > 0, repr(cid))
        clients = r.client_list()
        mine = [c for c in clients if c.get("name") == "py-check"]
        expect_eq("CLIENT LIST has the named client once", len(mine), 1)
        expect_eq("CLIENT LIST id", int(mine[0]["id"]), cid)
        expect_error("CLIENT SETNAME with a space", lambda: r.client_setname("a b"), redis.ResponseError, "")
        r.close()

    def check_dbsize_flushdb(self):
        r3 = self.client(db=3)
        r4 = self.client(db=4)
        r3.flushdb()
        r4.flushdb()
        r3.mset({f"py:d:{i}": "x" for i in range(25)})
        r4.set("py:d:keep", "x")
        expect_eq("DBSIZE", r3.dbsize(), 25)
        expect_true("FLUSHDB", r3.flushdb() is True)
        expect_eq("DBSIZE after FLUSHDB", r3.dbsize(), 0)
        expect_eq("FLUSHDB leaves other databases", r4.get("py:d:keep"), "x")
        r4.flushdb()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--allow-missing", action="store_true")
    args = ap.parse_args()
    if not ipaddress.ip_address(args.host).is_loopback:
        print(f"redis_py_check: refusing non-loopback host {args.host}", file=sys.stderr)
        return 2
    print(f"redis_py_check: redis-py {redis.__version__} against {args.host}:{args.port}")
    c = Checker(args.host, args.port, args.allow_missing)
    checks = [
        ("PING, ECHO, error texts", c.check_ping_and_errors),
        ("HELLO 2 / HELLO 3 (RESP3)", c.check_hello3),
        ("pipeline of 1000 commands", c.check_pipeline),
        ("transaction error paths", c.check_transaction_errors),
        ("transaction happy path", c.check_transaction_happy),
        ("DEL / EXISTS / TYPE", c.check_keys_commands),
        ("SCAN / scan_iter / KEYS over 1000 keys", c.check_scan),
        ("expiry", c.check_expiry),
        ("INCR and friends", c.check_incr),
        ("MSET / MGET", c.check_mset_mget),
        ("SELECT isolation", c.check_select),
        ("INFO", c.check_info),
        ("CONFIG GET", c.check_config),
        ("CLIENT SETNAME / GETNAME / ID / LIST", c.check_client),
        ("DBSIZE / FLUSHDB", c.check_dbsize_flushdb),
    ]
    for name, fn in checks:
        c.run(name, fn)
    print(f"redis_py_check: {c.passed} checks passed, {len(c.skipped)} skipped"
          + (f" ({', '.join(c.skipped)})" if c.skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
