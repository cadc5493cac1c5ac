#!/usr/bin/env bash
# Runs every test: formatting and lints, the Rust unit, property and black-box tests, and the
# system tests (pytest, real pcap files decoded by tshark). Installs what they need first.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_rust
apt_install build-essential pkg-config tshark python3-pip rsyslog curl nfdump \
  frr bird2 nftables iproute2 procps iputils-ping osmo-ggsn tmux snmpd snmptrapd snmp gobgpd
# The nfdump, frr, bird2, osmo-ggsn and gobgpd packages ship services; the tests start their own
# daemons (the test bed runs FRR, BIRD, GoBGP and sgsnemu inside network namespaces).
for unit in nfdump frr bird osmo-ggsn snmpd snmptrapd gobgpd; do systemctl disable --now "$unit" >/dev/null 2>&1 || true; done
PY=${PYTHON:-python3}
if ! "$PY" -c 'import pytest, scapy, prometheus_client, aiosmtpd' >/dev/null 2>&1; then
  "$PY" -m pip install -q -r tests/system/requirements.txt || \
    "$PY" -m pip install -q --break-system-packages -r tests/system/requirements.txt
fi

echo "== cargo fmt";    cargo fmt --all -- --check
echo "== cargo clippy"; cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test";   cargo test --workspace --release
# The fuzz targets' entry points again, with every kept crash input, in the dev profile: its
# overflow checks are what some of those inputs tripped (the release profile wraps silently).
echo "== fuzz inputs with overflow checks"; cargo test --workspace --lib fuzzing
echo "== build";        cargo build --release -p linerate
echo "== system tests"
LINERATE_REQUIRE_BIN=1 LINERATE_BIN="$PWD/target/release/linerate" "$PY" -m pytest -q tests/system
