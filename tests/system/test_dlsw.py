"""DLSw+ between Linerate daemons (DL-1 and DL-2 at CI scale), with the tester's SNA endpoints.

    tester namespace                 r1 (router under test)        r2 (its peer)
      tterm == lan  [bridge lan, DLSw 10.9.0.1]  wan == wan  [DLSw 10.9.0.2, bridge lan]  lan == thost
      (PUs)                                                                               (host)

DL-2 puts a redundant pair behind r1: r2a (10.9.0.2) and r2b (10.9.0.3) on a WAN switch (a
Linux bridge) and on one host LAN (a Linux bridge that floods everything, as a hub: both routers
stand in for the same PU MACs there), load balancing on r1; the test kills r2a mid-traffic.

What is checked, as outcomes:
- the peers exchange capabilities and come up (show dlsw peers, metrics, syslog);
- DL-1: at each rate every PU comes up through TEST/XID/SABME across the peers, every
  transaction is answered in order, the router's CPU is read, the report has its checks;
- every SSP message on the WAN decodes with tshark's `dlsw` dissector (circuit setup,
  INFOFRAMEs, teardown, capabilities), none malformed; the LAN side's LLC decodes too;
- after the run the circuits are gone on both routers;
- DL-2: circuits spread over the pair, the killed peer's circuits come back through the other;
- config mistakes in `dlsw` are refused with file, line and field.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from test_real_ports import Router
from testbed import require_tools, wait_until
from testbed.capture import read_fields

pytestmark = pytest.mark.usefixtures("testbed_session")

# LINERATE_DL1_FULL=1: DL-1's whole sweep (minutes) instead of CI's three rates; the report
# goes to LINERATE_DL1_OUT if given.
FULL = os.environ.get("LINERATE_DL1_FULL") == "1"


def router_yaml(local: str, peers: list[str], mac: str, *, keepalive: int = 1000,
                extra: str = "") -> str:
    # Two or three routers share this machine's CPUs with the tester: idle workers sleep
    # between polls instead of yielding (a yielding worker still takes every slice it is
    # offered, and the CPU figures would be the scheduler's).
    sleep = os.environ.get("LINERATE_DL_IDLE_SLEEP_US", "50")
    return f"""\
router: {{ workers: 1, idle-sleep-us: {sleep} }}
ports:
  - {{ name: lan, driver: af_packet, device: lan }}
  - {{ name: wan, driver: af_packet, device: wan }}
interfaces:
  - {{ name: lan, port: lan, mac: "{mac}1" }}
  - {{ name: wan, port: wan, mac: "{mac}2", ipv4: [{local}/24] }}
bridges:
  - {{ name: lan, members: [lan] }}
dlsw:
  local-peer: {local}
  remote-peers: [{", ".join(peers)}]
  bridge-domains: [lan]
  keepalive-ms: {keepalive}
{extra}control-plane: {{ taps: true }}
"""


def quiet(ns, *devs: str) -> None:
    for d in devs:
        ns.sysctl({f"net.ipv6.conf.{d}.disable_ipv6": 1})
        ns.up(d)


def peers_up(r: Router, n: int) -> bool:
    v = r.json("show", "dlsw", "peers")
    return sum(p["state"] == "connected" for p in v["peers"]) == n


def bench(bin_: Path, tst, r1: Router, out: Path, *args: str, timeout: int = 600):
    argv = [str(bin_), "bench", "dlsw", "--term", "tterm", "--host", "thost",
            "--dut-api", str(r1.sock), "--out", str(out), *args]
    p = tst.run(argv, check=False, timeout=timeout)
    return p


def test_dl1_between_two_linerate_peers(linerate_bin, testbed, tmp_path):
    require_tools("tshark")
    tst, n1, n2 = testbed.netns("tester"), testbed.netns("r1"), testbed.netns("r2")
    testbed.veth(tst, "tterm", n1, "lan")
    testbed.veth(tst, "thost", n2, "lan")
    testbed.veth(n1, "wan", n2, "wan")
    quiet(tst, "tterm", "thost")
    quiet(n1, "lan", "wan")
    quiet(n2, "lan", "wan")
    # Each end's capture holds what it received (a packet socket's sends pass its own side's
    # capture by): both ends together are the whole WAN.
    # (Not in the full sweep: tshark would take the CPU being measured.)
    wans = [] if FULL else [testbed.capture(n1, "wan", "dlsw-wan-r1.pcap"),
                            testbed.capture(n2, "wan", "dlsw-wan-r2.pcap")]
    lan = None if FULL else testbed.capture(tst, "tterm", "dlsw-lan.pcap")
    r1 = Router(linerate_bin, n1, tmp_path / "r1",
                router_yaml("10.9.0.1", ["10.9.0.2"], "02:00:00:00:01:0",
                            extra="  log-circuits: true\n"))
    r2 = Router(linerate_bin, n2, tmp_path / "r2",
                router_yaml("10.9.0.2", ["10.9.0.1"], "02:00:00:00:02:0"))
    try:
        wait_until(lambda: peers_up(r1, 1) and peers_up(r2, 1), 20,
                   what="the DLSw peers to connect")
        out = Path(os.environ.get("LINERATE_DL1_OUT", tmp_path / "dl1"))
        if FULL:
            # The whole sweep: the report's rates, then beyond until the CPU saturates.
            rates = os.environ.get("LINERATE_DL1_RATES")
            extra = ["--rates", rates] if rates else []
            p = bench(linerate_bin, tst, r1, out, "--step-seconds", "8", *extra, timeout=3600)
            print(p.stdout, p.stderr)
            rep = json.loads((out / "dl-1.json").read_text())
            assert all(c["pass"] for c in rep["checks"] if "every" in c["name"]), rep["checks"]
            return
        p = bench(linerate_bin, tst, r1, out, "--rates", "24,100,800", "--step-seconds", "6")
        rep = json.loads((out / "dl-1.json").read_text())
        assert p.returncode == 0 and rep["verdict"] == "pass", \
            p.stdout + p.stderr + json.dumps(rep["checks"], indent=1)
        steps = {s["asked_fps"]: s for s in rep["steps"]}
        assert set(steps) == {24, 100, 800}
        for fps, s in steps.items():
            assert s["pus_up"] == s["pus"] == s["router_circuits"], s
            assert s["lost"] == 0 and s["corrupt"] == 0 and s["out_of_order"] == 0, s
            assert abs(s["fps"] - fps) <= 0.05 * fps, s
            assert s["cpu"]["router"] > 0, s
        assert steps[800]["pus"] == 100 and steps[800]["lus"] == 400
        assert (out / "dl-1.md").read_text().startswith("# DL-1")
        assert (out / "dl-1.svg").read_text().startswith("<svg")
        # Both routers let go of every circuit when the PUs left.
        for r in (r1, r2):
            assert r.json("show", "dlsw", "circuits")["circuits"] == []
        peers = r1.json("show", "dlsw", "peers")
        (pv,) = peers["peers"]
        assert pv["info_in"] > 0 and pv["info_out"] > 0 and pv["malformed"] == 0, pv
        assert pv["version"].startswith("Linerate"), pv
        t = peers["totals"]
        assert t["circuits_connected"] == 12 + 50 + 100 and t["lan_malformed"] == 0, t
        reach = r1.json("show", "dlsw", "reachability")["entries"]
        assert {"mac": "0200.5eff.0001", "kind": "remote", "via": ["10.9.0.2"]} in reach
        metrics = r1.cli("show", "metrics")
        assert 'linerate_dlsw_peer_up{peer="10.9.0.2"} 1' in metrics, metrics[-2000:]
        assert 'linerate_dlsw_circuit_events_total{event="connected"} 162' in metrics
        logs = [x["msgid"] for x in r1.json("show", "logging", "-n", "1000")]
        assert "DLSW_PEER_UP" in logs and "DLSW_CIRCUIT_UP" in logs, logs
    finally:
        for w in wans:
            w.stop()
        if lan:
            lan.stop()
        r1.stop()
        r2.stop()
    # Every SSP message decodes, none malformed; the circuit's whole life is on the wire.
    rows = [row for w in wans
            for row in read_fields(w.pcap, ["dlsw.message_type", "_ws.malformed",
                                            "_ws.expert.severity"], "dlsw")]
    assert rows, "no DLSw on the WAN"
    types = set()
    for t, malformed, sev in rows:
        assert not malformed, rows[:5]
        types.update(int(x, 16) for x in t.split(",") if x)
    for want in (0x20, 0x03, 0x04, 0x05, 0x07, 0x08, 0x09, 0x0a, 0x0e, 0x0f):
        assert want in types, (hex(want), sorted(types))
    llc = read_fields(lan.pcap, ["llc.dsap", "llc.control", "_ws.malformed"], "llc")
    assert len(llc) > 100 and not any(m for _, _, m in llc), llc[:5]


def test_dl2_a_redundant_peer_fails_and_its_circuits_move(linerate_bin, testbed, tmp_path):
    tst, n1 = testbed.netns("tester"), testbed.netns("r1")
    na, nb, sw = testbed.netns("r2a"), testbed.netns("r2b"), testbed.netns("sw")
    testbed.veth(tst, "tterm", n1, "lan")
    # The WAN switch and the host LAN hub.
    sw.ip("link", "add", "wanbr", "type", "bridge")
    sw.ip("link", "add", "hub", "type", "bridge", "ageing_time", "0")
    for ns, dev, port, br in ((n1, "wan", "w1", "wanbr"), (na, "wan", "wa", "wanbr"),
                              (nb, "wan", "wb", "wanbr"), (na, "lan", "la", "hub"),
                              (nb, "lan", "lb", "hub"), (tst, "thost", "th", "hub")):
        testbed.veth(ns, dev, sw, port)
        sw.ip("link", "set", port, "master", br)
        quiet(sw, port)
    quiet(sw, "wanbr", "hub")
    quiet(tst, "tterm", "thost")
    for ns in (n1, na, nb):
        quiet(ns, "lan", "wan")
    fast = "  dead-after: 3\n"
    r1 = Router(linerate_bin, n1, tmp_path / "r1",
                router_yaml("10.9.0.1", ["10.9.0.2", "10.9.0.3"], "02:00:00:00:01:0",
                            keepalive=200, extra=fast + "  load-balance: true\n"))
    ra = Router(linerate_bin, na, tmp_path / "r2a",
                router_yaml("10.9.0.2", ["10.9.0.1"], "02:00:00:00:0a:0", keepalive=200,
                            extra=fast))
    rb = Router(linerate_bin, nb, tmp_path / "r2b",
                router_yaml("10.9.0.3", ["10.9.0.1"], "02:00:00:00:0b:0", keepalive=200,
                            extra=fast))
    try:
        wait_until(lambda: peers_up(r1, 2), 20, what="both DLSw peers to connect")
        out = Path(os.environ.get("LINERATE_DL2_OUT", tmp_path / "dl2"))
        pus = int(os.environ.get("LINERATE_DL2_PUS", "40"))
        p = bench(linerate_bin, tst, r1, out, "--pus", str(pus), "--tps", os.environ.get("LINERATE_DL2_TPS", "2"),
                  "--cut", f"kill -9 {ra.proc.pid}", "--timeout-seconds", "30")
        rep = json.loads((out / "dl-2.json").read_text())
        checks = {c["name"]: c for c in rep["checks"]}
        assert checks["circuits spread over the pair"]["pass"], checks
        assert checks["every circuit re-established"]["pass"], checks
        assert checks["transactions after recovery"]["pass"], checks
        # r2a carried about half: those links dropped and came back through r2b.
        assert pus // 4 <= rep["circuits_lost"] <= 3 * pus // 4, rep
        assert rep["reestablish_ms"] is not None and rep["reestablish_ms"] < 10_000, rep
        after = {x["peer"]: x for x in rep["peers_after"]}
        assert after["10.9.0.2"]["state"] == "disconnected", after
        # r1 noticed by the missed keepalives (3 x 200 ms), not by TCP's own timers.
        assert rep["detect_ms"] < 3_000, rep
        logs = r1.json("show", "logging", "-n", "1000")
        down = [x for x in logs if x["msgid"] == "DLSW_PEER_DOWN"]
        assert down and "keepalives missed" in down[0]["text"], down
        print(p.stdout)
    finally:
        r1.stop()
        rb.stop()
        if ra.proc.running:
            ra.stop()


BAD = [
    ("remote-peers: [10.9.0.1]", "dlsw.remote-peers[0]", "this is the local peer"),
    ("bridge-domains: [nope]", "no bridge domain named `nope`", None),
    ("llc2: { window: 128 }", "dlsw.llc2.window", "1..127"),
]


@pytest.mark.parametrize("line,field,why", BAD)
def test_dlsw_config_mistakes_are_named(linerate_bin, tmp_path, line, field, why):
    text = router_yaml("10.9.0.1", ["10.9.0.2"], "02:00:00:00:01:0")
    key = line.split(":")[0]
    text = "\n".join(
        (f"  {line}" if ln.strip().startswith(f"{key}:") else ln) for ln in text.splitlines()
    ) + "\n"
    if key == "llc2":
        text = text.replace("  keepalive-ms: 1000\n", f"  keepalive-ms: 1000\n  {line}\n")
    f = tmp_path / "r.yaml"
    f.write_text(text)
    r = subprocess.run([str(linerate_bin), "check", str(f)], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode != 0, r.stdout
    msg = r.stdout + r.stderr
    assert str(f) in msg and field in msg, msg
    if why:
        assert why in msg, msg
    # The line is the one written.
    lineno = next(i + 1 for i, ln in enumerate(text.splitlines()) if line.split(":")[1].strip()[:5] in ln and key in ln)
    assert f":{lineno}:" in msg, (lineno, msg)
