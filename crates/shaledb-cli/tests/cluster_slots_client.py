# redis-py's RedisCluster against several replica groups (cluster_slots.rs), run as
#
#   python3 -c "$(cat cluster_slots_client.py)" mixed PORT N
#       One startup node. Writes N keys of strings, hashes, lists and sets in turn (keys of every slot range),
#       reads each back and compares; prints "ok N keys, L in slots below 8192" and exits 0, or prints what
#       differs and exits 1.
#   python3 -c "$(cat cluster_slots_client.py)" writer STOP_FILE PORT...
#       Writes SET w:I vI for I = 0, 1, 2 ... until STOP_FILE exists (bounded: 20,000 keys or 5 minutes),
#       printing "A I SLOT" for each acknowledged write, "U I ERROR" for each whose outcome is unknown (an
#       exception: the client then starts again from the startup nodes) and "X I REPLY" for a reply that is
#       neither, flushed at once.
#   python3 -c "$(cat cluster_slots_client.py)" types STOP_FILE PORT...
#       As writer, but the writes mix types (cluster_reshard.rs): op I is, by I % 7, SET s:I vI, INCR c:K,
#       RPUSH l:K I, HSET h:K fI I, SADD t:K I, ZADD z:K I mI, XADD x:K * f I, for K one of 16 keys (type_key:
#       most keys in slots 0-63, the slots the test moves). Prints "A I SLOT REPLY" for each acknowledged write, "U I ERROR" and "X I REPLY" as
#       writer does.
#   python3 -c "$(cat cluster_slots_client.py)" check LOG PORT
#       Reads a types LOG and checks through one startup node that every acknowledged write is there: the string
#       with its value, every acknowledged INCR counted (the counter at least its highest acknowledged reply),
#       the list, hash, set and sorted-set members, each stream entry under the id XADD answered. Prints "ok A acknowledged writes checked" and exits 0, or what is missing
#       and exits 1.
import os
import sys
import time

import redis
from redis.cluster import ClusterNode, RedisCluster


def mixed(port, n):
    client = RedisCluster(host="127.0.0.1", port=port, socket_timeout=10, socket_connect_timeout=2)
    low = 0
    for i in range(n):
        kind = i % 4
        if kind == 0:
            assert client.set(f"s:{i}", f"v{i}") is True
        elif kind == 1:
            assert client.hset(f"h:{i}", mapping={"a": str(i), "b": f"b{i}"}) == 2
        elif kind == 2:
            assert client.rpush(f"l:{i}", "x", str(i), "z") == 3
        else:
            assert client.sadd(f"t:{i}", "p", str(i)) == 2
    bad = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            key, got, want = f"s:{i}", client.get(f"s:{i}"), f"v{i}".encode()
        elif kind == 1:
            key, got, want = f"h:{i}", client.hgetall(f"h:{i}"), {b"a": str(i).encode(), b"b": f"b{i}".encode()}
        elif kind == 2:
            key, got, want = f"l:{i}", client.lrange(f"l:{i}", 0, -1), [b"x", str(i).encode(), b"z"]
        else:
            key, got, want = f"t:{i}", client.smembers(f"t:{i}"), {b"p", str(i).encode()}
        if got != want:
            bad.append(f"{key}: {got!r}, expected {want!r}")
        if client.keyslot(key) < 8192:
            low += 1
    client.close()
    if bad:
        print(f"{len(bad)} of {n} keys read back wrong:", *bad[:20], sep="\n")
        sys.exit(1)
    print(f"ok {n} keys, {low} in slots below 8192")


def writer(stop_file, ports):
    nodes = [ClusterNode("127.0.0.1", p) for p in ports]
    client = None
    started = time.monotonic()
    for i in range(20_000):
        if os.path.exists(stop_file) or time.monotonic() - started > 300:
            break
        key = f"w:{i}"
        try:
            if client is None:
                client = RedisCluster(startup_nodes=nodes, socket_timeout=5, socket_connect_timeout=1)
            ok = client.set(key, f"v{i}") is True
            print(f"A {i} {client.keyslot(key)}" if ok else f"X {i} unexpected reply", flush=True)
        except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException, OSError) as e:
            print(f"U {i} {type(e).__name__}", flush=True)
            try:
                if client is not None:
                    client.close()
            except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException, OSError):
                pass
            client = None
            time.sleep(0.2)
        time.sleep(0.005)


# Tags whose keys hash to slots 0-63, the slots cluster_reshard.rs moves back and forth.
def low_tags():
    from redis.crc import key_slot

    tags, n = [], 0
    while len(tags) < 64:
        if key_slot(f"g{n}".encode()) < 64:
            tags.append(f"g{n}")
        n += 1
    return tags


TAGS = low_tags() if sys.argv[1] in ("types", "check") else []


def type_key(i):
    """Op I's key: s:I (3 of 4 with a tag of slots 0-63), else one of 16 keys per type, in slots 0-63."""
    kind, k = i % 7, i % 16
    if kind == 0:
        return f"s:{{{TAGS[i % 64]}}}:{i}" if (i // 7) % 4 else f"s:{i}"
    return f"{'-clhtzx'[kind]}:{{{TAGS[k]}}}"


def type_op(client, i):
    key, kind = type_key(i), i % 7
    if kind == 0:
        return key, client.set(key, f"v{i}") is True and "OK"
    if kind == 1:
        return key, client.incr(key)
    if kind == 2:
        return key, client.rpush(key, str(i))
    if kind == 3:
        return key, client.hset(key, f"f{i}", str(i))
    if kind == 4:
        return key, client.sadd(key, str(i))
    if kind == 5:
        return key, client.zadd(key, {f"m{i}": i})
    entry_id = client.xadd(key, {"f": str(i)})
    return key, entry_id.decode() if entry_id else entry_id


def types(stop_file, ports):
    nodes = [ClusterNode("127.0.0.1", p) for p in ports]
    client = None
    started = time.monotonic()
    for i in range(20_000):
        if os.path.exists(stop_file) or time.monotonic() - started > 300:
            break
        try:
            if client is None:
                client = RedisCluster(startup_nodes=nodes, socket_timeout=5, socket_connect_timeout=1)
            key, reply = type_op(client, i)
            if reply is False or reply is None:
                print(f"X {i} {reply!r}", flush=True)
            else:
                print(f"A {i} {client.keyslot(key)} {reply}", flush=True)
        except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException, OSError) as e:
            print(f"U {i} {type(e).__name__}", flush=True)
            try:
                if client is not None:
                    client.close()
            except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException, OSError):
                pass
            client = None
            time.sleep(0.2)
        time.sleep(0.003)


def check(log, port):
    client = RedisCluster(host="127.0.0.1", port=port, socket_timeout=10, socket_connect_timeout=2)
    acked, counters, bad = 0, {}, []
    with open(log) as f:
        lines = f.read().split("\n")[:-1]
    for line in lines:
        w = line.split(" ")
        if w[0] != "A":
            continue
        acked += 1
        i, reply = int(w[1]), w[3]
        kind, key = i % 7, type_key(i)
        if kind == 0:
            got = client.get(key)
            if got != f"v{i}".encode():
                bad.append(f"{key}: {got!r}")
        elif kind == 1:
            counters[key] = max(counters.get(key, 0), int(reply))
        elif kind == 2:
            if str(i).encode() not in client.lrange(key, 0, -1):
                bad.append(f"{key} lacks {i}")
        elif kind == 3:
            got = client.hget(key, f"f{i}")
            if got != str(i).encode():
                bad.append(f"{key} f{i}: {got!r}")
        elif kind == 4:
            if not client.sismember(key, str(i)):
                bad.append(f"{key} lacks {i}")
        elif kind == 5:
            got = client.zscore(key, f"m{i}")
            if got != float(i):
                bad.append(f"{key} m{i}: {got!r}")
        else:
            got = client.xrange(key, reply, reply)
            if got != [(reply.encode(), {b"f": str(i).encode()})]:
                bad.append(f"{key} {reply}: {got!r}")
    for key, at_least in counters.items():
        got = int(client.get(key) or 0)
        if got < at_least:
            bad.append(f"{key} is {got}, an INCR was acknowledged with {at_least}")
    client.close()
    if bad:
        print(f"{len(bad)} of {acked} acknowledged writes are missing:", *bad[:30], sep="\n")
        sys.exit(1)
    print(f"ok {acked} acknowledged writes checked")


if sys.argv[1] == "mixed":
    mixed(int(sys.argv[2]), int(sys.argv[3]))
elif sys.argv[1] == "writer":
    writer(sys.argv[2], [int(p) for p in sys.argv[3:]])
elif sys.argv[1] == "types":
    types(sys.argv[2], [int(p) for p in sys.argv[3:]])
elif sys.argv[1] == "check":
    check(sys.argv[2], int(sys.argv[3]))
else:
    sys.exit(f"unknown mode {sys.argv[1]}")
