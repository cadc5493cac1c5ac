#!/usr/bin/env bash
# Builds Linerate and runs the embedded demo: scenario ME-1S (240,000 routes over 8 uplinks, 24
# access ports, backbone pattern both ways), an RFC 2544 throughput search for every frame size
# from 64 to 9,216 bytes with the services off, then with the seed's services on (a 10,000-line
# ACL, a 500-line QoS list re-marking DSCP, NetFlow v9 on every interface), printed beside the
# Cisco ME 6524 report's table 1 (which ran with those services on). The table, JSON and an
# SVG chart land in target/bench/. Extra arguments go to `linerate bench demo` (e.g. --seconds 10).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_rust
apt_install build-essential pkg-config
cargo build --release -p linerate
./target/release/linerate bench demo "$@"
