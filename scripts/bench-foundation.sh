#!/usr/bin/env bash
# The foundation issue's benchmark set (docs/results.md quotes its output). Long: rte_lpm adds a
# few thousand routes per second at millions of routes. Needs libdpdk-dev for the DPDK columns.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_rust
apt_install build-essential pkg-config libdpdk-dev
cargo build --release -p linerate
L=./target/release/linerate
S=${SECONDS_PER_TRIAL:-3}
run() { echo; echo "\$ $*"; "$@"; }
# Forwarding through mem ports, 3M IPv4 routes, 64-byte frames; then route churn under traffic.
run $L bench forward --profile xr6 --scale 5 --workers 1 --sizes 64 --seconds "$S"
run $L bench forward --profile xr6 --scale 5 --workers 2 --sizes 64 --seconds "$S"
run $L bench forward --profile xr6 --scale 5 --workers 1 --sizes 64 --seconds "$S" --churn
# IPv6: 230k and 600k routes. rte_lpm6 adds in prefix-length order (in file order it needs
# minutes per 100k routes; lookups are the same either way).
export LPMBENCH_ADD_ORDER=length
run $L bench lpm --family ipv6 --profile internet --scale 1 --dpdk lpm6,fib6 --seconds "$S"
run $L bench lpm --family ipv6 --profile xr6 --scale 1.5333 --dpdk lpm6,fib6 --seconds "$S"
run $L bench lpm --family ipv6 --profile xr6 --scale 4 --dpdk lpm6,fib6 --seconds "$S"
unset LPMBENCH_ADD_ORDER
# IPv4: 1M and 3M routes, XR-6 mix and Internet-shaped; random and in-route addresses. rte_lpm's
# add is quadratic (1M routes: ~10 minutes here); at 3M only rte_fib is run beside Linerate.
run $L bench lpm --family ipv4 --profile xr6 --scale 5 --dpdk fib --seconds "$S"
run $L bench lpm --family ipv4 --profile internet --scale 3 --dpdk fib --seconds "$S"
run $L bench lpm --family ipv4 --profile xr6 --scale 1.6667 --seconds "$S" --no-huge
run $L bench lpm --family ipv4 --profile xr6 --scale 1.6667 --dpdk fib,lpm --seconds "$S"
run $L bench lpm --family ipv4 --profile internet --scale 1 --dpdk fib,lpm --seconds "$S"
