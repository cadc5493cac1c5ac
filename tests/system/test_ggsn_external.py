"""GG-1 in external mode: the tester's SGSN emulator and user traffic against a GGSN on veths.

    tester namespace                                   DUT namespace
    linerate bench external --gtp   t0 (Gn) == d0      a Linerate daemon's GGSN (10.0.0.1),
      GTP-C from 10.0.0.3 (t0's own)                     or OsmoGGSN (gtpu-mode tun)
      emulates 10.0.0.2 (SGSN user plane)
                                    t1 (Gi) == d1
      emulates 10.1.0.2 (the server)

What is checked, as outcomes:

- the SGSN emulator creates every context it asked for (and the GGSN's own table says so), finds
  a create rate in its search, and deletes them all at the end (the GGSN's table is empty);
- user traffic through the tunnels at a low fixed load: every uplink G-PDU comes out on Gi as
  the subscriber's packet, every downlink packet comes back tunnelled (the analyzer steps into
  the G-PDU to find the signature), nothing lost, corrupted or misdelivered, both frame sizes;
- the GGSN counted the uplink and downlink packets (Linerate's metrics);
- the report carries the GG-1 checks and the seed's figures beside each size.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from test_real_ports import Router
from testbed import require_tools, wait_until
from testbed.capture import read_fields
from testbed.ggsn import DUT_YAML, GG2_DUT_YAML, osmo_ggsn_config

pytestmark = pytest.mark.usefixtures("testbed_session")


LINERATE = """\
router: { workers: 1 }
limits: { gtp-contexts: 8192 }
ports:
  - { name: gn, driver: af_packet, device: d0 }
  - { name: gi, driver: af_packet, device: d1 }
interfaces:
  - { name: gn, port: gn, mac: "02:00:00:00:0d:01", ipv4: [10.0.0.1/24] }
  - { name: gi, port: gi, mac: "02:00:00:00:0d:02", ipv4: [10.1.0.1/24] }
ggsn:
  address: 10.0.0.1
  echo-interval: 0
  apns:
    - { name: internet, ipv4-pool: 10.64.0.0/16 }
control-plane: { taps: true }
"""


def topology(testbed):
    """The tester's Gn end carries the SGSN's signalling address (its kernel's UDP socket);
    nothing else on the tester's ends has an address or IPv6."""
    tst, dut = testbed.netns("tester"), testbed.netns("dut")
    testbed.veth(tst, "t0", dut, "d0")
    testbed.veth(tst, "t1", dut, "d1")
    tst.sysctl({"net.ipv6.conf.t0.disable_ipv6": 1, "net.ipv6.conf.t1.disable_ipv6": 1})
    tst.addr("t0", "10.0.0.3/24")
    tst.up("t1")
    for d in ("d0", "d1"):
        dut.sysctl({f"net.ipv6.conf.{d}.disable_ipv6": 1})
        dut.up(d)
    dut.up("lo")
    return tst, dut


def gg1(bin_: Path, tst, dut_file: Path, out: Path, *extra: str) -> dict:
    """GG-1 at a low fixed load (20% of 10 Mbit/s, a few thousand frames/s each way): low
    enough for any GGSN here, so a lost frame is a fault, not a limit."""
    argv = [str(bin_), "bench", "external", "--dut", str(dut_file), "--port", "gn=t0",
            "--port", "gi=t1", "--gtp", "--sgsn", "10.0.0.3", "--speed", "10m", "--load", "20",
            "--seconds", "1", "--sizes", "64", "--sizes", "1460", "--out", str(out), *extra]
    p = tst.run(argv, check=False, timeout=300)
    assert p.returncode == 0, f"{p.stdout}\n{p.stderr}"
    rep = json.loads((out / "gg-1.json").read_text())
    rep["_md"] = (out / "gg-1.md").read_text()
    rep["_log"] = p.stderr
    return rep


def assert_traffic(rep: dict) -> None:
    rows = {r["key"]: r for r in rep["rows"]}
    assert set(rows) == {"64", "1460"}, rows.keys()
    for key, row in rows.items():
        (t,) = row["trials"]
        assert t["pass"] and t["lost"] == 0 and t["rx"] == t["tx"], (key, t)
        assert t["corrupted"] == 0 and t["misdelivered"] == 0, (key, t)
        streams = {s["name"]: s for s in t["streams"]}
        for name in ("uplink", "downlink"):
            s = streams[name]
            assert s["tx"] > 100 and s["rx"] == s["tx"] and s["lost"] == 0, (key, s)
        assert row["seed_fps"] in (1_300_000, 840_000), row
    md = rep["_md"]
    assert "Beside the seed" in md and "| 64 | " in md and "| 1460 | " in md, md


def test_gg1_against_linerate(linerate_bin, testbed, tmp_path):
    require_tools("tshark")
    tst, dut = topology(testbed)
    r = Router(linerate_bin, dut, tmp_path / "dut", LINERATE)
    # Gn as the wire carries it, from both ends (a frame a packet socket sends past the qdisc
    # is not seen by captures on its own side): each end's capture holds what it received.
    caps = [testbed.capture(tst, "t0", "gn-tester.pcap"), testbed.capture(dut, "d0", "gn-dut.pcap")]
    try:
        f = tmp_path / "dut.yaml"
        f.write_text(DUT_YAML)
        rep = gg1(linerate_bin, tst, f, tmp_path / "out", "--contexts", "300",
                  "--create-rate", "2000", "--create-search", "300",
                  "--create-search-max", "4000", "--dut-api", str(r.sock))
        assert rep["verdict"] == "pass", json.dumps(rep["checks"], indent=1) + rep["_log"]
        g = rep["gtp"]
        assert g["create"]["accepted"] == 300 and g["contexts_held"] == 300, g["create"]
        assert g["traffic_contexts"] == 300
        assert g["delete"]["accepted"] == 300, g["delete"]
        # The search doubled from 1,000/s to its 4,000/s cap, every step passing.
        assert [s["rate"] for s in g["search"]] == [1000, 2000, 4000], g["search"]
        assert g["best_rate"] == 4000, g["search"]
        names = {c["name"] for c in rep["checks"]}
        assert {"contexts created", "create rate", "create rate search",
                "contexts deleted", "64: throughput"} <= names, names
        assert_traffic(rep)
        # Linerate's own view: every create accepted (3 search steps and the run), all gone.
        stats = r.json("show", "gtp", "statistics")
        assert stats["creates"].get("128", 0) == 4 * 300, stats
        assert r.json("show", "gtp", "contexts")["total"] == 0
        metrics = r.cli("show", "metrics")
        up = re.search(r'linerate_gtp_packets_total\{direction="uplink"\} (\d+)', metrics)
        down = re.search(r'linerate_gtp_packets_total\{direction="downlink"\} (\d+)', metrics)
        sent_up = sum(s["tx"] for row in rep["rows"] for s in row["trials"][0]["streams"]
                      if s["name"] == "uplink")
        assert up and down and int(up.group(1)) >= sent_up > 0, metrics[-2000:]
        assert int(down.group(1)) >= sent_up, metrics[-2000:]
    finally:
        r.stop()
        for c in caps:
            c.stop()
    # tshark decodes every GTP message on Gn, the tester's and the GGSN's, without a complaint:
    # creates, deletes and their responses, G-PDUs both ways with the test packets inside.
    rows = [row for c in caps for row in read_fields(
        c.pcap, ["gtp.message", "_ws.expert.severity", "ip.dst", "udp.dstport"],
        display_filter="gtp")]
    kinds = {row[0] for row in rows}
    assert {"0x10", "0x11", "0x14", "0x15", "0xff"} <= kinds, kinds
    assert not any(row[1] for row in rows), [r for r in rows if r[1]][:5]
    gpdu_to = {row[2].split(",")[0] for row in rows if row[0] == "0xff"}
    assert {"10.0.0.1", "10.0.0.2"} <= gpdu_to, gpdu_to
    # Inside the uplink's tunnels: the tester's UDP test packets to the Gi host.
    assert any(row[0] == "0xff" and row[2].endswith("10.1.0.2") and "5000" in row[3]
               for row in rows), rows[:5]


def test_gg1_against_osmo_ggsn(linerate_bin, testbed, tmp_path):
    """The same run against a GGSN that is not ours: OsmoGGSN with its tun user plane, the
    kernel routing between the tun and Gi."""
    require_tools("osmo-ggsn")
    tst, dut = topology(testbed)
    dut.addr("d0", "10.0.0.1/24")
    dut.addr("d1", "10.1.0.1/24")
    dut.set_forwarding(True)
    dut.sysctl({"net.ipv4.conf.all.rp_filter": 0, "net.ipv4.conf.default.rp_filter": 0})
    wd = testbed.dir("osmo-ggsn")
    (wd / "state").mkdir()
    cfg = wd / "osmo-ggsn.cfg"
    cfg.write_text(osmo_ggsn_config(wd / "state", "10.64.0.0/16"))
    proc = dut.popen(["osmo-ggsn", "-c", str(cfg)], log=wd / "out.log", name="osmo-ggsn")
    try:
        wait_until(lambda: "10.0.0.1:2123" in dut.run(["ss", "-uln"]).stdout or not proc.running,
                   10, what="osmo-ggsn to bind GTP-C")
        assert proc.running, (wd / "out.log").read_text()
        f = tmp_path / "dut.yaml"
        f.write_text(DUT_YAML)
        rep = gg1(linerate_bin, tst, f, tmp_path / "out", "--contexts", "200",
                  "--create-rate", "500")
        assert rep["verdict"] == "pass", json.dumps(rep["checks"], indent=1) + rep["_log"]
        g = rep["gtp"]
        assert g["create"]["accepted"] == 200 and g["delete"]["accepted"] == 200, g
        assert_traffic(rep)
    finally:
        proc.stop()


def test_gg2_two_linerate_ggsns_side_by_side(linerate_bin, testbed, tmp_path):
    """GG-2's shape at a low fixed load: two GGSNs (two daemons, namespaces of their own), one
    tester with an SGSN emulator for each; 1024 B through A, 1460 B through B, each alone and
    then together. Every frame of each goes through its own GGSN only; together carries what
    alone did (at this load there is room for both)."""
    tst = testbed.netns("tester")
    routers = []
    try:
        for i, name in enumerate("ab"):
            dut = testbed.netns(f"ggsn_{name}")
            t = (f"t{2 * i}", f"t{2 * i + 1}")
            testbed.veth(tst, t[0], dut, "d0")
            testbed.veth(tst, t[1], dut, "d1")
            tst.sysctl({f"net.ipv6.conf.{d}.disable_ipv6": 1 for d in t})
            tst.addr(t[0], f"10.{2 * i}.0.3/24")
            tst.up(t[1])
            for d in ("d0", "d1"):
                dut.sysctl({f"net.ipv6.conf.{d}.disable_ipv6": 1})
                dut.up(d)
            dut.up("lo")
            # Two daemons and the tester on this machine's CPUs: idle workers sleep between
            # polls instead of yielding, or the two spinning workers starve the rest (a run of
            # the whole suite lost frames "together" here while the test alone passed).
            cfg = LINERATE.replace("10.0.0.", f"10.{2 * i}.0.").replace(
                "10.1.0.", f"10.{2 * i + 1}.0.").replace(
                "router: { workers: 1 }", "router: { workers: 1, idle-sleep-us: 50 }")
            routers.append(Router(linerate_bin, dut, tmp_path / f"dut-{name}", cfg))
        f = tmp_path / "dut.yaml"
        f.write_text(GG2_DUT_YAML)
        out = tmp_path / "out"
        argv = [str(linerate_bin), "bench", "external", "--dut", str(f),
                "--port", "gna=t0", "--port", "gia=t1", "--port", "gnb=t2", "--port", "gib=t3",
                "--gtp", "--sgsn", "10.0.0.3", "--sgsn", "10.2.0.3", "--contexts", "100",
                "--create-rate", "1000", "--sizes", "1024", "--second-size", "1460", "--alone",
                "--speed", "10m", "--load", "20", "--seconds", "1", "--out", str(out)]
        p = tst.run(argv, check=False, timeout=300)
        assert p.returncode == 0, f"{p.stdout}\n{p.stderr}"
        rep = json.loads((out / "gg-2.json").read_text())
        md = (out / "gg-2.md").read_text()
        assert rep["verdict"] == "pass", json.dumps(rep["checks"], indent=1) + p.stderr
        assert [g["instance"] for g in rep["gtp"]] == ["A", "B"]
        assert all(g["create"]["accepted"] == 100 and g["delete"]["accepted"] == 100
                   for g in rep["gtp"]), rep["gtp"]
        rows = {r["key"]: r for r in rep["rows"]}
        assert set(rows) == {"1024 A alone", "1024 B alone", "1024 together"}, rows.keys()
        for key, names in (("1024 A alone", {"A uplink", "A downlink"}),
                           ("1024 B alone", {"B uplink", "B downlink"}),
                           ("1024 together", {"A uplink", "A downlink", "B uplink",
                                              "B downlink"})):
            (t,) = rows[key]["trials"]
            assert {s["name"] for s in t["streams"]} == names, (key, t["streams"])
            assert t["pass"] and t["lost"] == 0 and t["misdelivered"] == 0, (key, t)
            assert all(s["rx"] == s["tx"] > 50 for s in t["streams"]), (key, t["streams"])
        names = {c["name"] for c in rep["checks"]}
        assert {"1024: GGSN A together against alone", "1024: GGSN B together against alone",
                "GGSN A: contexts created", "GGSN B: contexts deleted"} <= names, names
        assert "Side by side" in md and "| 1024 | B |" in md, md
        # Each GGSN created its own subscribers' contexts only.
        for r in routers:
            assert r.json("show", "gtp", "statistics")["creates"].get("128") == 100
    finally:
        for r in routers:
            r.stop()
