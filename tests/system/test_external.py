"""The tester in external mode: `linerate bench external` against real devices on veths.

    tester namespace                      DUT namespace
    linerate bench external  t0 == d0   the kernel forwarding, or `linerate daemon`
                             t1 == d1

What is checked, as outcomes (never a rate or a time):

- against the kernel's forwarding, which has never heard of the tester's addresses: the kernel
  resolves them by ARP (IPv4) and ND (IPv6), the tester answers, and the kernel's neighbour
  table holds the tester's MACs; every frame of a low fixed load comes back; the report has the
  CPU-per-frame figures;
- against a Linerate daemon whose MACs DUT.yaml leaves out: the tester resolves them, every frame
  comes back, the daemon's own counters saw every frame the tester sent, and its workers' busy
  time (from its API) gives a per-frame figure;
- the side-by-side script's quick mode runs the five devices and prints a row for each (slow).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from testbed.netns import wait_until

pytestmark = pytest.mark.usefixtures("testbed_session")

REPO = Path(__file__).resolve().parents[2]
T_MAC = ["02:00:00:00:00:02", "02:00:00:00:01:02"]
LR_MAC = ["02:00:00:00:0a:01", "02:00:00:00:0b:01"]


def topology(testbed):
    """Two namespaces, two 2-queue veths; the tester's ends carry no addresses and no IPv6 (its
    kernel must not answer or chatter for the addresses the tester emulates)."""
    tst, dut = testbed.netns("tester"), testbed.netns("dut")
    testbed.veth(tst, "t0", dut, "d0")
    testbed.veth(tst, "t1", dut, "d1")
    tst.sysctl({"net.ipv6.conf.t0.disable_ipv6": 1, "net.ipv6.conf.t1.disable_ipv6": 1})
    return tst, dut


def dut_yaml(macs: list[str] | None, ipv6: bool = True) -> str:
    """The device as the tester sees it; `macs` None leaves the interfaces' MACs to resolve."""
    mac = [f', mac: "{m}"' for m in macs] if macs else ["", ""]
    v6 = [', ipv6: ["2001:db8:0:a::1/64"]', ', ipv6: ["2001:db8:0:b::1/64"]'] if ipv6 else ["", ""]
    n6 = (f'  - {{ interface: p0, ip: "2001:db8:0:a::2", mac: "{T_MAC[0]}" }}\n'
          f'  - {{ interface: p1, ip: "2001:db8:0:b::2", mac: "{T_MAC[1]}" }}\n') if ipv6 else ""
    return f"""\
ports:
  - {{ name: p0, driver: af_packet, device: d0 }}
  - {{ name: p1, driver: af_packet, device: d1 }}
interfaces:
  - {{ name: p0, port: p0{mac[0]}, ipv4: [198.18.0.1/24]{v6[0]} }}
  - {{ name: p1, port: p1{mac[1]}, ipv4: [198.18.1.1/24]{v6[1]} }}
neighbors:
  - {{ interface: p0, ip: 198.18.0.2, mac: "{T_MAC[0]}" }}
  - {{ interface: p1, ip: 198.18.1.2, mac: "{T_MAC[1]}" }}
{n6}"""


def bench_external(bin_: Path, tst, dut_file: Path, out: Path, *extra: str) -> dict:
    """One trial per frame size at 20% of 10 Mbit/s (about 3,000 64-byte frames/s per port):
    low enough for any device on this machine, so loss would be a fault, not a limit."""
    argv = [str(bin_), "bench", "external", "--dut", str(dut_file), "--port", "p0=t0",
            "--port", "p1=t1", "--speed", "10m", "--load", "20", "--seconds", "1",
            "--out", str(out), *extra]
    p = tst.run(argv, check=False, timeout=120)
    assert p.returncode == 0, f"{p.stdout}\n{p.stderr}"
    md = (out / "external.md").read_text()
    rep = json.loads((out / "external.json").read_text())
    rep["_md"] = md
    return rep


def the_trial(rep: dict) -> dict:
    (row,) = rep["rows"]
    (t,) = row["trials"]
    return t


def assert_cpu_fields(rep: dict, t: dict) -> None:
    cpu = t["cpu"]
    assert cpu["frames"] == t["rx"] > 0
    for k in ("machine_ns_per_frame", "tester_ns_per_frame", "dut_ns_per_frame"):
        assert cpu[k] is not None and cpu[k] >= 0, (k, cpu)
    assert cpu["tester_s"] > 0 and cpu["machine_s"] > 0
    md = rep["_md"]
    for col in ("machine CPU (ns/frame)", "tester (ns/frame)", "DUT: machine - tester (ns/frame)",
                "DUT's own (ns/frame)"):
        assert col in md, md
    assert "no probe: its drops are unknown" in md


def test_kernel_forwarding_resolves_the_tester_by_arp_and_nd(linerate_bin, testbed, tmp_path):
    tst, dut = topology(testbed)
    dut.addr("d0", "198.18.0.1/24", "2001:db8:0:a::1/64")
    dut.addr("d1", "198.18.1.1/24", "2001:db8:0:b::1/64")
    dut.set_forwarding(True)
    dut.sysctl({"net.ipv4.conf.all.rp_filter": 0, "net.ipv4.conf.d0.rp_filter": 0,
                "net.ipv4.conf.d1.rp_filter": 0})
    # The kernel's MACs given: the tester asks nothing, so the kernel must resolve the tester.
    macs = [dut.ip_json("link", "show", d)[0]["address"] for d in ("d0", "d1")]
    f = tmp_path / "dut.yaml"
    f.write_text(dut_yaml(macs))

    rep = bench_external(linerate_bin, tst, f, tmp_path / "v4")
    t = the_trial(rep)
    assert t["pass"] and t["lost"] == 0 and t["rx"] == t["tx"] > 1000, t
    assert t["foreign"] == 0 and t["misdelivered"] == 0, t
    ports = {p["dut_port"]: p for p in rep["external"]["ports"]}
    # The kernel asked on both links (each direction's next hop), and the tester answered.
    assert ports["p0"]["control"]["arp_answered"] >= 1, ports
    assert ports["p1"]["control"]["arp_answered"] >= 1, ports
    assert not ports["p0"]["dut_mac_resolved"] and ports["p0"]["dut_mac"] == macs[0]
    neigh = {n["dst"]: n for n in dut.ip_json("neigh", "show")}
    for ip, mac in (("198.18.0.2", T_MAC[0]), ("198.18.1.2", T_MAC[1])):
        assert neigh[ip].get("lladdr") == mac, neigh
        assert not {"FAILED", "INCOMPLETE"} & set(neigh[ip]["state"]), neigh
    assert_cpu_fields(rep, t)

    rep6 = bench_external(linerate_bin, tst, f, tmp_path / "v6", "--ipv6")
    t6 = the_trial(rep6)
    assert t6["pass"] and t6["lost"] == 0 and t6["rx"] == t6["tx"] > 1000, t6
    ports6 = {p["dut_port"]: p for p in rep6["external"]["ports"]}
    assert ports6["p0"]["control"]["ns_answered"] >= 1, ports6
    assert ports6["p1"]["control"]["ns_answered"] >= 1, ports6
    neigh6 = {n["dst"]: n for n in dut.ip_json("-6", "neigh", "show")}
    assert neigh6["2001:db8:0:b::2"].get("lladdr") == T_MAC[1], neigh6


def test_linerate_daemon_with_macs_resolved_and_its_workers_busy_time(linerate_bin, testbed,
                                                                      tmp_path):
    tst, dut = topology(testbed)
    for d in ("d0", "d1"):
        dut.sysctl({f"net.ipv6.conf.{d}.disable_ipv6": 1})
        dut.up(d)
    wd = tmp_path / "dut"
    wd.mkdir()
    cfg = wd / "router.yaml"
    cfg.write_text(f"""\
router: {{ workers: 1 }}
ports:
  - {{ name: p0, driver: af_packet, device: d0 }}
  - {{ name: p1, driver: af_packet, device: d1 }}
interfaces:
  - {{ name: p0, port: p0, mac: "{LR_MAC[0]}", ipv4: [198.18.0.1/24] }}
  - {{ name: p1, port: p1, mac: "{LR_MAC[1]}", ipv4: [198.18.1.1/24] }}
""")
    sock, log = wd / "api.sock", wd / "daemon.log"
    proc = dut.popen([str(linerate_bin), "daemon", "--config", str(cfg), "--no-state",
                      "--socket", str(sock)], log=log, name="linerate")
    try:
        wait_until(lambda: sock.exists() or not proc.running, 20, what="the daemon's API socket")
        assert proc.running, log.read_text()
        f = tmp_path / "dut.yaml"
        f.write_text(dut_yaml(None, ipv6=False))
        rep = bench_external(linerate_bin, tst, f, tmp_path / "out", "--dut-api", str(sock))
        t = the_trial(rep)
        assert t["pass"] and t["lost"] == 0 and t["rx"] == t["tx"] > 1000, t
        ports = {p["dut_port"]: p for p in rep["external"]["ports"]}
        for p, mac in (("p0", LR_MAC[0]), ("p1", LR_MAC[1])):
            assert ports[p]["dut_mac_resolved"] and ports[p]["dut_mac"] == mac, ports
        # The router learned the tester's addresses (from the tester's requests or its answers).
        nbrs = json.loads(subprocess.run(
            [str(linerate_bin), "--socket", str(sock), "show", "neighbors", "--json"],
            capture_output=True, text=True, timeout=30, check=True).stdout)
        learned = {(n["ip"], n["mac"]) for n in nbrs}
        assert ("198.18.0.2", T_MAC[0]) in learned and ("198.18.1.2", T_MAC[1]) in learned, nbrs
        # The router's own counters saw at least every frame of the priming and the trial.
        workers = json.loads(subprocess.run(
            [str(linerate_bin), "--socket", str(sock), "show", "workers", "--json"],
            capture_output=True, text=True, timeout=30, check=True).stdout)
        assert sum(w["rx_packets"] for w in workers) >= t["tx"]
        cpu = t["cpu"]
        assert cpu["dut_busy_s"] is not None and cpu["dut_busy_s"] > 0, cpu
        assert cpu["dut_busy_ns_per_frame"] > 0, cpu
        assert f"DUT's own = its workers' busy time ({sock})" in rep["_md"]
        assert_cpu_fields(rep, t)
    finally:
        proc.stop()


@pytest.mark.slow
def test_versus_quick_mode_prints_all_five_rows(linerate_bin, tmp_path):
    out = tmp_path / "versus"
    env = dict(os.environ, LINERATE_BIN=str(linerate_bin))
    p = subprocess.run([sys.executable, str(REPO / "benches" / "versus" / "run.py"), "--quick",
                        "--out", str(out)], check=False, capture_output=True, text=True,
                       timeout=900, env=env)
    assert p.returncode == 0, f"{p.stdout}\n{p.stderr}"
    rows = [l for l in p.stdout.splitlines() if l.startswith("| (")]
    # The NDR table, then the table at one common load: a row per device in each.
    assert [r.split(")")[0] for r in rows] == ["| (a", "| (b", "| (c", "| (d", "| (e"] * 2, \
        p.stdout
    res = json.loads((out / "versus.json").read_text())
    for r in res["results"]:
        assert not r["error"], r
        x, c = r["rows"]["64"], r["rows"]["common"]
        assert x["ndr_fps"] > 0 and x["machine_ns"] > 0 and x["tester_ns"] > 0, r
        assert c["ndr_fps"] > 0 and c["machine_ns"] > 0, r
        # Linerate's workers' busy time comes from its API; the kernel has none.
        assert (x["workers_ns"] is not None) == (r["key"] in "de"), r
