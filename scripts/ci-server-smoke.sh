#!/usr/bin/env bash
# Real clients against `shaledb server` (issue 11's CI checks): starts the server on a free loopback port in a
# temporary directory, then redis-cli checks (PING, SET/GET, INCR, an unknown command's error text), a short
# redis-benchmark that must finish with no error, scripts/redis_py_check.py (redis-py), and SHUTDOWN, after
# which the server must exit 0. The server is killed on any exit; every step is bounded by a timeout.
#
#   scripts/ci-server-smoke.sh [--bin PATH] [--allow-missing] [-n REQUESTS]
#
# --bin: the shaledb binary (default: $SHALEDB_BIN, else target/debug/shaledb, built when missing).
# --allow-missing: a check whose command the server answers with "unknown command" is printed as SKIP instead
#   of failing (for trying the script on a server that does not have every command yet; CI runs without it).
# A missing peer (redis-cli/redis-benchmark, redis-py) is a printed SKIP line, never a silent pass.
set -euo pipefail
cd "$(dirname "$0")/.."

bin="${SHALEDB_BIN:-}"
allow_missing=0
requests=20000
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --allow-missing) allow_missing=1; shift ;;
    -n) requests="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "ci-server-smoke: unknown argument $1" >&2; exit 2 ;;
  esac
done

if [ -z "$bin" ]; then
  bin="${CARGO_TARGET_DIR:-target}/debug/shaledb"
  if [ ! -x "$bin" ]; then
    cargo build -p shaledb-cli --locked 2>&1 | tail -n 3
  fi
fi
if [ ! -x "$bin" ]; then
  echo "ci-server-smoke: FAIL: no shaledb binary at $bin" >&2
  exit 1
fi

fail() {
  echo "ci-server-smoke: FAIL: $*" >&2
  if [ -n "${log:-}" ] && [ -f "$log" ]; then
    echo "---- server log (last 40 lines)" >&2
    tail -n 40 "$log" >&2
  fi
  exit 1
}

work=$(mktemp -d -t shaledb-smoke.XXXXXX)
log="$work/server.log"
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

have_tools=1
for t in redis-cli redis-benchmark; do
  if ! command -v "$t" >/dev/null 2>&1; then
    echo "ci-server-smoke: SKIP redis-cli/redis-benchmark checks: $t is not installed (Debian package redis-tools)"
    have_tools=0
  fi
done
have_py=1
if ! python3 -c 'import redis' >/dev/null 2>&1; then
  echo "ci-server-smoke: SKIP redis-py checks: python3 cannot import redis (pip install redis)"
  have_py=0
fi
if [ "$have_tools" = 0 ] && [ "$have_py" = 0 ]; then
  echo "ci-server-smoke: SKIP: no client is installed, nothing to run against the server"
  exit 0
fi

"$bin" server --dir "$work/db" --port 0 --appendfsync always > "$log" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 300); do
  port=$(sed -n 's/^# shaledb server .* on 127\.0\.0\.1:\([0-9][0-9]*\) .*/\1/p' "$log" | head -n 1)
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || fail "the server exited before listening"
  sleep 0.1
done
[ -n "$port" ] || fail "no '# shaledb server ... on 127.0.0.1:PORT' line within 30 s"
echo "ci-server-smoke: server pid $pid on 127.0.0.1:$port ($bin)"

cli() { timeout 20 redis-cli -h 127.0.0.1 -p "$port" "$@"; }

# True when the reply is the server's unknown-command error for the command.
unknown() { grep -qi "^ERR unknown command '$1'" <<<"$2"; }

# expect NAME EXPECTED ARGS...: the reply must equal EXPECTED. Sets skipped=1 when the command is unknown
# and --allow-missing was given.
skipped=0
expect() {
  skipped=0
  local name="$1" want="$2"
  shift 2
  local got
  got=$(cli "$@" 2>&1) || fail "$name: redis-cli failed: $got"
  if [ "$got" != "$want" ]; then
    if [ "$allow_missing" = 1 ] && unknown "$1" "$got"; then
      echo "ci-server-smoke: SKIP $name: the server does not know $1 yet"
      skipped=1
      return 0
    fi
    fail "$name: $* answered '$got', expected '$want'"
  fi
  echo "ci-server-smoke: ok $name"
}

if [ "$have_tools" = 1 ]; then
  expect "PING" "PONG" PING
  expect "PING message" "hello" PING hello
  expect "SET" "OK" SET smoke:k "v 1"
  expect "GET" "v 1" GET smoke:k
  expect "GET missing" "" GET smoke:missing
  expect "INCR new key" "1" INCR smoke:ctr
  if [ "$skipped" = 0 ]; then
    expect "INCR again" "2" INCR smoke:ctr
    expect "GET counter" "2" GET smoke:ctr
    got=$(cli INCR smoke:k 2>&1)
    [ "$got" = "ERR value is not an integer or out of range" ] || fail "INCR on a non-integer answered '$got'"
    echo "ci-server-smoke: ok INCR non-integer error"
  fi
  got=$(cli NOSUCHCMD a b 2>&1)
  [ "$got" = "ERR unknown command 'NOSUCHCMD', with args beginning with: 'a' 'b' " ] \
    || fail "unknown command answered '$got'"
  echo "ci-server-smoke: ok unknown command error text"
  got=$(cli GET 2>&1)
  [ "$got" = "ERR wrong number of arguments for 'get' command" ] || fail "GET with no key answered '$got'"
  echo "ci-server-smoke: ok wrong arity error text"

  # redis-benchmark: every test must finish, with no error from the server.
  tests="ping,set,get,incr,mset"
  if [ "$allow_missing" = 1 ]; then
    kept="ping,set,get"
    for c in incr mset; do
      case "$c" in
        incr) probe=$(cli INCR smoke:probe 2>&1) ;;
        mset) probe=$(cli MSET smoke:probe1 a smoke:probe2 b 2>&1) ;;
      esac
      if unknown "$c" "$probe"; then
        echo "ci-server-smoke: SKIP redis-benchmark -t $c: the server does not know ${c^^} yet"
      else
        kept="$kept,$c"
      fi
    done
    tests="$kept"
  fi
  bench_out="$work/bench.out"
  status=0
  timeout 600 redis-benchmark -h 127.0.0.1 -p "$port" -t "$tests" -n "$requests" -q > "$bench_out" 2>&1 || status=$?
  # -q draws progress with carriage returns; keep the final lines.
  tr '\r' '\n' < "$bench_out" | grep -E 'requests per second|rror' | grep -v 'rps=' || true
  [ "$status" = 0 ] || fail "redis-benchmark -t $tests exited with status $status: $(tr '\r' '\n' < "$bench_out" | tail -n 3)"
  if tr '\r' '\n' < "$bench_out" | grep -qiE 'error|ERR '; then
    fail "redis-benchmark reported an error: $(tr '\r' '\n' < "$bench_out" | grep -iE 'error|ERR ' | head -n 3)"
  fi
  finished=$(tr '\r' '\n' < "$bench_out" | grep -c 'requests per second' || true)
  wanted=$(tr ',' '\n' <<<"$tests" | wc -l)
  # ping is two tests (PING_INLINE and PING_MBULK).
  grep -q ping <<<"$tests" && wanted=$((wanted + 1))
  [ "$finished" = "$wanted" ] || fail "redis-benchmark finished $finished tests of $wanted ($tests)"
  echo "ci-server-smoke: ok redis-benchmark -t $tests -n $requests ($finished tests, no error)"
fi

if [ "$have_py" = 1 ]; then
  py_args=(--port "$port")
  [ "$allow_missing" = 1 ] && py_args+=(--allow-missing)
  timeout 600 python3 scripts/redis_py_check.py "${py_args[@]}" || fail "redis_py_check.py failed"
fi

# SHUTDOWN: the server stops and exits 0 (SIGTERM when the server does not know SHUTDOWN and
# --allow-missing was given).
if [ "$have_tools" = 1 ]; then
  got=$(cli SHUTDOWN 2>&1 || true)
  if unknown shutdown "$got"; then
    [ "$allow_missing" = 1 ] || fail "SHUTDOWN answered '$got'"
    echo "ci-server-smoke: SKIP SHUTDOWN: the server does not know it yet; stopping it with SIGTERM"
    kill -TERM "$pid"
  elif [ -n "$got" ] && [ "$got" != OK ] && ! grep -qi 'closed\|connect' <<<"$got"; then
    fail "SHUTDOWN answered '$got'"
  fi
else
  kill -TERM "$pid"
fi
for _ in $(seq 1 300); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "the server is still running 30 s after SHUTDOWN"
status=0
wait "$pid" || status=$?
pid=""
[ "$status" = 0 ] || fail "the server exited with status $status after SHUTDOWN"
if grep -qi 'panic' "$log"; then
  fail "the server log shows a panic"
fi
echo "ci-server-smoke: ok server stopped, exit status 0"
echo "ci-server-smoke: passed"
