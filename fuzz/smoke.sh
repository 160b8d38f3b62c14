#!/usr/bin/env bash
# CI smoke run of every fuzz target: SECONDS_PER_TARGET (default 30) each, starting from the committed
# corpus, when a nightly toolchain and cargo-fuzz are available; otherwise says so and succeeds (the corpora
# are replayed on stable by `cargo test` in any case). New inputs go to a temporary directory.
set -euo pipefail
cd "$(dirname "$0")"
secs="${SECONDS_PER_TARGET:-30}"
if ! cargo +nightly --version >/dev/null 2>&1 || ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz smoke: skipped (needs a nightly toolchain and cargo-fuzz)"
  exit 0
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for t in block blob table wal manifest batch db resp options ops dump_payload commands scripts; do
  mkdir -p "$scratch/$t"
  echo "fuzz smoke: $t for ${secs}s"
  cargo +nightly fuzz run -O "$t" "$scratch/$t" "corpus/$t" -- -max_total_time="$secs" -max_len=65536 \
    -rss_limit_mb=2048 2>&1 | tail -n 2
done
echo "fuzz smoke: no crash"
