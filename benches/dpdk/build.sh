#!/usr/bin/env bash
# Build the DPDK LPM/FIB comparison harness.
#   benches/dpdk/build.sh            -> <repo>/target/dpdk/lpm_bench
#   OUT=/some/path benches/dpdk/build.sh
# Works from any directory.  Needs libdpdk-dev (DPDK 22.11 on Debian 12).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
OUT="${OUT:-$repo/target/dpdk/lpm_bench}"
case "$OUT" in
    /*) ;;
    *) OUT="$repo/$OUT" ;; # relative OUT is taken relative to the repo root
esac

if ! command -v pkg-config >/dev/null 2>&1; then
    echo "build.sh: pkg-config not found; install it: apt-get install -y pkg-config libdpdk-dev" >&2
    exit 1
fi
if ! pkg-config --exists libdpdk; then
    echo "build.sh: pkg-config cannot find libdpdk; install the Debian package: apt-get install -y libdpdk-dev" >&2
    exit 1
fi

mkdir -p "$(dirname "$OUT")"
cd "$here"
# shellcheck disable=SC2046 # pkg-config output must be word-split
gcc -O3 -march=native -Wall -Wextra -o "$OUT" lpm_bench.c $(pkg-config --cflags --libs libdpdk)
echo "built $OUT (DPDK $(pkg-config --modversion libdpdk))" >&2
