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


if sys.argv[1] == "mixed":
    mixed(int(sys.argv[2]), int(sys.argv[3]))
elif sys.argv[1] == "writer":
    writer(sys.argv[2], [int(p) for p in sys.argv[3:]])
else:
    sys.exit(f"unknown mode {sys.argv[1]}")
