"""`linerate bench external --switching` against real L2 devices on veths (testbed/l2.py):
the Linux bridge in a namespace and a Linerate daemon bridging on af_packet ports.

Outcomes checked: flooding reaches every other port with every frame and nothing comes back
out of the ingress; a Linerate bridge with `mac-limit: 1000` has a learning capacity of exactly
1,000 (the procedure searches to one address); the Linux bridge learns at least the small bound
tried; the NDR search finds a load carried with zero loss and nothing flooded.
"""

from __future__ import annotations

import pytest
from testbed import l2

pytestmark = pytest.mark.usefixtures("testbed_session")

NPORTS = 3


def run(linerate_bin, tst, tmp_path, flush, macs):
    f = tmp_path / "dut.yaml"
    f.write_text(l2.dut_yaml(NPORTS))
    return l2.bench(linerate_bin, tst, f, NPORTS, tmp_path / "out", "flooding,capacity,ndr",
                    flush, "--macs", str(macs), "--flood-macs", "500", "--learn-fps", "20000",
                    "--speed", "1g", "--seconds", "0.5", "--resolution", "10", "--quiet",
                    timeout=120)


def check_common(rep):
    f = rep["flooding"]
    got = dict(f["port_rx"])
    assert got == {"p0": 500, "p1": 0, "p2": 500}, rep["_md"]
    n = rep["ndr"]
    assert n["fps"] > 0 and n["lost"] == 0 and n["flooded"] == 0, rep["_md"]


def test_linux_bridge(linerate_bin, testbed, tmp_path):
    tst, dut = l2.topology(testbed, NPORTS)
    br = l2.LinuxBridge(dut, NPORTS)
    rep = run(linerate_bin, tst, tmp_path, br.flush, 2000)
    check_common(rep)
    assert rep["capacity"]["addresses"] == 2000, rep["_md"]
    assert rep["verdict"] == "pass", rep["_md"]


def test_linerate_bridge_with_a_mac_limit(linerate_bin, testbed, tmp_path):
    tst, dut = l2.topology(testbed, NPORTS)
    lr = l2.LinerateBridge(linerate_bin, dut, tmp_path / "dut", NPORTS, macs=4096,
                           mac_limit=1000)
    try:
        rep = run(linerate_bin, tst, tmp_path, lr.flush, 2000)
        check_common(rep)
        assert rep["capacity"]["addresses"] == 1000, rep["_md"]
        assert rep["verdict"] == "pass", rep["_md"]
    finally:
        lr.stop()
