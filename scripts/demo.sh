#!/usr/bin/env bash
# Builds Linerate and runs the embedded demo: ME-1's 240,000-route table, every frame size from
# 64 to 9,216 bytes, printed beside the Cisco ME 6524 report's table. Extra arguments go to
# `linerate bench demo` (e.g. --seconds 5).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_rust
apt_install build-essential pkg-config
cargo build --release -p linerate
./target/release/linerate bench demo "$@"
