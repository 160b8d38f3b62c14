# A redis-py RedisCluster client writing to a replica group while its leader is killed (cluster_faults.rs).
#
#   python3 -c "$(cat cluster_py_writer.py)" STOP_FILE PORT...
#
# Writes item 0, 1, 2 ... in turn as SET py:str:I vI, HSET py:hash fI I, SADD py:set I and ZADD py:zset I mI,
# each idempotent, because RedisCluster itself retries a write after a lost connection or a redirect. Prints
# "A I" for each acknowledged item, "U I" for each whose outcome is unknown (an exception) and "X I" for a reply
# that is neither (the test fails on it), flushed at once,
# until STOP_FILE exists (bounded: 100,000 items or 15 minutes).
import os
import sys
import time

import redis
from redis.cluster import ClusterNode, RedisCluster

stop_file = sys.argv[1]
nodes = [ClusterNode("127.0.0.1", int(p)) for p in sys.argv[2:]]


def connect():
    return RedisCluster(startup_nodes=nodes, socket_timeout=5, socket_connect_timeout=1)


client = None
started = time.monotonic()
for i in range(100_000):
    if os.path.exists(stop_file) or time.monotonic() - started > 900:
        break
    kind = i % 4
    try:
        if client is None:
            client = connect()
        if kind == 0:
            ok = client.set(f"py:str:{i}", f"v{i}") is True
        elif kind == 1:
            ok = client.hset("py:hash", f"f{i}", str(i)) in (0, 1)
        elif kind == 2:
            ok = client.sadd("py:set", str(i)) in (0, 1)
        else:
            ok = client.zadd("py:zset", {f"m{i}": i}) in (0, 1)
        print(f"A {i}" if ok else f"X {i} unexpected reply", flush=True)
    except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException, OSError) as e:
        print(f"U {i} {type(e).__name__}", flush=True)
        # No leader yet (an election, a restart): start again from the startup nodes, after a pause.
        try:
            if client is not None:
                client.close()
        except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException, OSError):
            pass
        client = None
        time.sleep(0.2)
    time.sleep(0.01)
