#!/usr/bin/env bash
# Build the DPDK comparison harnesses: LPM/FIB (lpm_bench), ACL (acl_bench) and the hash table
# (hash_bench: rte_hash as a MAC table), each into the same folder.
#   benches/dpdk/build.sh            -> <repo>/target/dpdk/lpm_bench and .../acl_bench
#   OUT=/some/path benches/dpdk/build.sh          (lpm_bench's path; acl_bench goes beside it)
#   ACL_OUT=/other/path benches/dpdk/build.sh     (acl_bench's path)
# Works from any directory.  Needs libdpdk-dev (DPDK 22.11 on Debian 12).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
OUT="${OUT:-$repo/target/dpdk/lpm_bench}"
case "$OUT" in
    /*) ;;
    *) OUT="$repo/$OUT" ;; # relative OUT is taken relative to the repo root
esac
ACL_OUT="${ACL_OUT:-$(dirname "$OUT")/acl_bench}"
case "$ACL_OUT" in
    /*) ;;
    *) ACL_OUT="$repo/$ACL_OUT" ;;
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
mkdir -p "$(dirname "$ACL_OUT")"
# shellcheck disable=SC2046
gcc -O3 -march=native -Wall -Wextra -o "$ACL_OUT" acl_bench.c $(pkg-config --cflags --libs libdpdk)
echo "built $ACL_OUT (DPDK $(pkg-config --modversion libdpdk))" >&2
HASH_OUT="$(dirname "$OUT")/hash_bench"
# shellcheck disable=SC2046
gcc -O3 -march=native -Wall -Wextra -o "$HASH_OUT" hash_bench.c $(pkg-config --cflags --libs libdpdk)
echo "built $HASH_OUT (DPDK $(pkg-config --modversion libdpdk))" >&2
