#!/usr/bin/env bash
# Runs the fuzz targets in fuzz/ one after the other, SECONDS each (default 600), and prints per
# target the executions, execs/s, coverage (libFuzzer's cov and ft) and whether it crashed.
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]     # every target unless some are named
#
# Corpora grow in fuzz/corpus/TARGET (not committed), seeded from the small inputs kept in
# fuzz/seeds/TARGET and fuzz/regressions/TARGET; crashes land in fuzz/artifacts/TARGET, each
# target's output in fuzz/logs/TARGET.log. One fuzzer process at a time. Exits non-zero if any
# target crashed. Not part of scripts/test.sh: the regression inputs run there as stable tests.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_rust

SECS=${1:-600}
shift || true
case "$SECS" in
  '' | *[!0-9]*) echo "usage: $0 [SECONDS] [TARGET...]" >&2; exit 2 ;;
esac

command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
# cargo-fuzz needs nightly flags; stable can be told to accept them if nightly is missing.
if cargo +nightly --version >/dev/null 2>&1; then
  CARGO=(cargo +nightly)
else
  echo "no nightly toolchain: building with RUSTC_BOOTSTRAP=1" >&2
  export RUSTC_BOOTSTRAP=1
  CARGO=(cargo)
fi

if [ $# -gt 0 ]; then
  TARGETS=("$@")
else
  mapfile -t TARGETS < <("${CARGO[@]}" fuzz list)
fi

# Release code with debug assertions (and so overflow checks): an overflow is a finding too.
echo "== building ${TARGETS[*]}"
"${CARGO[@]}" fuzz build -O -a

mkdir -p fuzz/logs
summary=()
failed=0
for t in "${TARGETS[@]}"; do
  corpus=fuzz/corpus/$t
  mkdir -p "$corpus" "fuzz/artifacts/$t"
  dirs=("$corpus")
  for d in "fuzz/seeds/$t" "fuzz/regressions/$t"; do
    [ -d "$d" ] && dirs+=("$d")
  done
  log=fuzz/logs/$t.log
  echo "== $t: ${SECS}s ($(date -u +%H:%M:%S) UTC)"
  status=ok
  # -rss_limit_mb and -timeout: a run that eats 2 GB or hangs for 10 s on one input is a finding.
  if ! "${CARGO[@]}" fuzz run -O -a "$t" "${dirs[@]}" -- \
      -max_total_time="$SECS" -print_final_stats=1 -rss_limit_mb=2048 -timeout=10 \
      >"$log" 2>&1; then
    status=CRASHED
    failed=1
  fi
  # The last status line ("#N DONE cov: X ft: Y ... exec/s: Z", or the last progress line if
  # it stopped early) and the final stats.
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
  units=$(find "$corpus" -type f | wc -l)
  line=$(printf '%-13s %-8s %12s execs %8s exec/s  cov %6s  ft %7s  corpus %6s' \
    "$t" "$status" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$units")
  echo "$line"
  [ "$status" = ok ] || grep -m 3 -E 'panicked|ERROR: libFuzzer|SUMMARY|Test unit written' "$log" || true
  summary+=("$line")
done

echo "== summary (${SECS}s per target)"
printf '%s\n' "${summary[@]}"
exit "$failed"
