"""`linerate bench external --multicast` against real snooping switches on veths (testbed/l2.py):
the Linux bridge (IGMP snooping with its own querier) and a Linerate daemon bridging on
af_packet ports, configured alike (unregistered groups not flooded, fast leave on receivers).

Outcomes checked, on both: every join sent; at the rate found, every receiver got every frame of
its groups (per receiver, no loss, no duplicate); the probe group reached its port only after its
join and stopped after its leave (its times are figures: scheduling is in them).
"""

from __future__ import annotations

import pytest
from testbed import l2

pytestmark = pytest.mark.usefixtures("testbed_session")

NPORTS = 4


def run(linerate_bin, tst, tmp_path):
    f = tmp_path / "dut.yaml"
    f.write_text(l2.dut_yaml(NPORTS))
    return l2.bench_multicast(linerate_bin, tst, f, NPORTS, tmp_path / "out",
                              "--groups", "20", "--sources", "5", "--speed", "1g",
                              "--seconds", "0.5", "--resolution", "10", "--quiet", timeout=180)


def check(rep):
    m = rep["multicast"]
    assert m["joins_sent"] == m["joins_expected"] == 20 * (NPORTS - 1), rep["_md"]
    assert m["rows"] and all(r["lost"] == 0 and r["duplicated"] == 0 and
                             r["receivers"] == NPORTS - 1 for r in m["rows"]), rep["_md"]
    assert m["rows"][0]["output_fps"] > 0, rep["_md"]
    assert m["before_join"] == 0 and m["join_ms"] is not None and m["leave_ms"] is not None, \
        rep["_md"]
    for c in rep["checks"]:
        if not c["name"].startswith(("join to", "leave to")):
            assert c["pass"], (c, rep["_md"])


def test_linux_bridge_snooping(linerate_bin, testbed, tmp_path):
    tst, dut = l2.topology(testbed, NPORTS)
    l2.LinuxBridge(dut, NPORTS, snooping=True)
    check(run(linerate_bin, tst, tmp_path))


def test_linerate_bridge_snooping(linerate_bin, testbed, tmp_path):
    tst, dut = l2.topology(testbed, NPORTS)
    lr = l2.LinerateBridge(linerate_bin, dut, tmp_path / "dut", NPORTS, macs=4096, snooping=True)
    try:
        rep = run(linerate_bin, tst, tmp_path)
        check(rep)
        groups = lr.cli_json("show", "igmp", "snooping", "groups")
        assert groups["joined"] >= 20 * (NPORTS - 1), groups
    finally:
        lr.stop()
