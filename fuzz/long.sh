#!/usr/bin/env bash
# Long fuzzing runs, for the figures in docs/durability.md: each target runs in chunks of CHUNK_SECS (default
# 120) on a working corpus in WORK (default /tmp/shaledb-fuzz), seeded from corpus/, until its edge coverage
# ("cov:") has not grown for STALE_MINUTES (default 15), MAX_MINUTES (default 60) of wall time have passed, or
# MAX_CPU_MINUTES (default: no limit) of CPU time (user + system, of the fuzzer and its build) have been spent.
# One line per chunk goes to WORK/<target>.progress with the CPU seconds spent so far (cpu=), so a run that is
# paused or killed still says how much fuzzing it did; one summary line per target to standard output.
#
#   fuzz/long.sh                 # every target
#   fuzz/long.sh block wal       # some
#
# A crash stops the run of that target with libFuzzer's report in WORK/<target>.log and the input in
# artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")"
work="${WORK:-/tmp/shaledb-fuzz}"
chunk="${CHUNK_SECS:-120}"
stale=$((${STALE_MINUTES:-15} * 60))
max=$((${MAX_MINUTES:-60} * 60))
max_cpu=$((${MAX_CPU_MINUTES:-0} * 60))
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(block blob table wal manifest batch db resp dump_payload commands scripts)

for t in "${targets[@]}"; do
  mkdir -p "$work/$t"
  : > "$work/$t.progress"
  start=$(date +%s)
  best=-1
  best_at=$start
  runs=0
  cpu_ms=0
  while :; do
    now=$(date +%s)
    if [ $((now - best_at)) -ge "$stale" ] || [ $((now - start)) -ge "$max" ]; then break; fi
    if [ "$max_cpu" -gt 0 ] && [ $((cpu_ms / 1000)) -ge "$max_cpu" ]; then break; fi
    # bash's `time` keyword: the chunk's user and system seconds, children included, into $t.time.
    status=0
    { TIMEFORMAT='%3U %3S'; time cargo +nightly fuzz run -O "$t" "$work/$t" corpus/"$t" -- \
      -max_total_time="$chunk" -max_len=65536 -rss_limit_mb=2048 -print_final_stats=1 \
      > "$work/$t.log" 2>&1; } 2> "$work/$t.time" || status=$?
    read -r u s < "$work/$t.time" || true
    cpu_ms=$((cpu_ms + 10#${u//./} + 10#${s//./}))
    if [ "$status" -ne 0 ]; then
      echo "$t: CRASH after $(( $(date +%s) - start ))s; see $work/$t.log and artifacts/$t/"
      exit 1
    fi
    cov=$(grep -Eo 'DONE +cov: [0-9]+' "$work/$t.log" | grep -Eo '[0-9]+$' | tail -n 1)
    ft=$(grep -Eo 'DONE +cov: [0-9]+ ft: [0-9]+' "$work/$t.log" | grep -Eo '[0-9]+$' | tail -n 1)
    n=$(grep -Eo '^stat::number_of_executed_units: *[0-9]+' "$work/$t.log" | grep -Eo '[0-9]+$' || echo 0)
    runs=$((runs + n))
    now=$(date +%s)
    if [ "${cov:-0}" -gt "$best" ]; then best=$cov; best_at=$now; fi
    echo "$(date -u +%H:%M:%S) elapsed=$((now - start))s cov=$cov ft=$ft execs=$runs cpu=$((cpu_ms / 1000))s corpus=$(ls "$work/$t" | wc -l)" \
      >> "$work/$t.progress"
  done
  end=$(date +%s)
  echo "$t: $(( (end - start) / 60 )) min, $((cpu_ms / 60000)) CPU min, $runs executions, cov $best (last new edge at minute" \
    "$(( (best_at - start) / 60 ))), corpus $(ls "$work/$t" | wc -l) inputs, no crash"
done
