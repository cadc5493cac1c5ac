"""The GGSN (issue 20) against OsmoGGSN's SGSN emulator, sgsnemu, over real sockets.

    sgsn (sgsnemu, 10.0.0.2) -- [d0: Gn, 10.0.0.1] linerate [d1: Gi, 10.1.0.1] -- server (10.1.0.2)

The router's GGSN address is 10.0.0.1 (its interface p0's): GTP-C reaches the GTP service
through the punt path and p0's TAP twin; G-PDUs are decapsulated by the data plane and routed
out of p1 from APN `internet`'s interface, and the server's answers to the pool (10.64.0.0/16)
are tunnelled back. What is checked:

- sgsnemu's contexts are created (several processes, each with its own IMSIs, as it holds only
  a few hundred), and pings from inside the tunnels (sgsnemu's --pinghost) are all answered by
  the server's kernel;
- the data plane counted the G-PDUs both ways on each context (`show gtp contexts --json`)
  and dropped nothing for GTP;
- what crosses Gn decodes in tshark as GTP (Create PDP Context Request/Response, G-PDUs with
  ICMP inside), with no malformed packet;
- a G-PDU to a TEID nobody has gets an Error Indication back (scapy-free: a raw UDP socket);
- `clear gtp context` deletes one here (`show apn` counts its address free again);
- sgsnemu's exit deletes its contexts and their addresses go back to the pool.
"""

from __future__ import annotations

import re
import socket
import struct
import time

import pytest

from test_real_ports import Router
from testbed import require_tools, wait_until
from testbed.capture import read_fields

pytestmark = pytest.mark.usefixtures("testbed_session")

CONFIG = """\
router: { workers: 1 }
limits: { gtp-contexts: 4096 }
ports:
  - { name: p0, driver: af_packet, device: d0 }
  - { name: p1, driver: af_packet, device: d1 }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:0d:01", ipv4: [10.0.0.1/24] }
  - { name: p1, port: p1, mac: "02:00:00:00:0d:02", ipv4: [10.1.0.1/24] }
ggsn:
  address: 10.0.0.1
  echo-interval: 0
  apns:
    - { name: internet, ipv4-pool: 10.64.0.0/16, dns: [10.1.0.53] }
control-plane:
  taps: true
  neighbor: { reachable-time: 30, retransmit-ms: 200, retries: 5, hold: 8 }
"""


def topology(testbed):
    dut, sgsn, server = testbed.netns("dut"), testbed.netns("sgsn"), testbed.netns("server")
    testbed.veth(sgsn, "eth0", dut, "d0")
    testbed.veth(server, "eth0", dut, "d1")
    for d in ("d0", "d1"):
        dut.sysctl({f"net.ipv6.conf.{d}.disable_ipv6": 1})
        dut.up(d)
    dut.up("lo")
    sgsn.addr("eth0", "10.0.0.2/24", "10.0.0.3/24", "10.0.0.4/24")
    server.addr("eth0", "10.1.0.2/24")
    server.route("10.64.0.0/16", "via", "10.1.0.1")
    return dut, sgsn, server


def ipv4_header(src: str, dst: str) -> bytes:
    """A 20-byte IPv4 header (protocol 253, experimental) with its checksum: a T-PDU."""
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20, 0, 0, 64, 253, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    s = sum(struct.unpack("!10H", h))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return h[:10] + struct.pack("!H", ~s & 0xFFFF) + h[12:]


def sgsnemu(testbed, sgsn, i: int, contexts: int, pings: int):
    """sgsnemu number `i` from its own address, with its own IMSI range, pinging the server
    from inside its tunnels (`pings` 0: holding its contexts idle until it is stopped)."""
    d = testbed.dir(f"sgsnemu{i}")
    argv = ["timeout", "40", "stdbuf", "-oL", "sgsnemu", "-l", f"10.0.0.{2 + i}", "-r", "10.0.0.1",
            "--imsi", f"26201{i:02d}00000001", "--nsapi", "5", "--apn", "internet",
            "--contexts", str(contexts), "--statedir", str(d), "--pidfile", str(d / "pid"),
            "--timelimit", "8"]
    if pings:
        argv += ["--pinghost", "10.1.0.2", "--pingcount", str(pings), "--pingrate", "5"]
    return sgsn.popen(argv, log=d / "out.log", name=f"sgsnemu{i}")


def test_sgsnemu_contexts_carry_pings_through_the_ggsn(linerate_bin, testbed, tmp_path):
    require_tools("sgsnemu", "tshark")
    dut, sgsn, server = topology(testbed)
    cap = testbed.capture(sgsn, "eth0", "gn.pcap")
    r = Router(linerate_bin, dut, tmp_path / "dut", CONFIG)
    try:
        emus = [sgsnemu(testbed, sgsn, i, contexts=4, pings=25) for i in range(2)]

        def counted():
            v = r.json("show", "gtp", "contexts")
            up = sum(c["uplink_packets"] for c in v["contexts"])
            down = sum(c["downlink_packets"] for c in v["contexts"])
            counted.last = (v["total"], up, down)
            return v if v["total"] == 8 and up >= 10 else None

        # While sgsnemu pings (5 s): 8 contexts, the echoes counted both ways on the contexts
        # that carry them (one each way may be in flight).
        v = wait_until(counted, 8, what="8 contexts and echoes counted",
                       diagnostics=lambda: f"(contexts, up, down) {counted.last}")
        ctxs = v["contexts"]
        assert sorted(c["imsi"][:7] for c in ctxs) == ["2620100"] * 4 + ["2620101"] * 4, ctxs
        assert len({c["ipv4"] for c in ctxs}) == 8 and all(c["ipv4"].startswith("10.64.") for c in ctxs)
        assert {c["sgsn_data"] for c in ctxs} == {"10.0.0.2", "10.0.0.3"}, ctxs
        carriers = [c for c in ctxs if c["uplink_packets"]]
        # 84-byte ICMP echoes in, 84-byte replies out.
        assert carriers and all(
            c["uplink_bytes"] == 84 * c["uplink_packets"]
            and c["downlink_bytes"] == 84 * c["downlink_packets"]
            and 0 <= c["uplink_packets"] - c["downlink_packets"] <= 1 for c in carriers), carriers
        assert len(r.json("show", "gtp", "contexts", "--imsi", ctxs[0]["imsi"])["contexts"]) == 1
        metrics = r.cli("show", "metrics")
        assert "linerate_gtp_contexts 8\n" in metrics, metrics[-2000:]
        up = re.search(r'linerate_gtp_packets_total\{direction="uplink"\} (\d+)', metrics)
        assert up and int(up.group(1)) >= 10, metrics[-2000:]
        wait_until(lambda: all(not e.running for e in emus), 30, what="sgsnemu to finish")
        outs = [e.output(200_000) for e in emus]
        for out in outs:
            # sgsnemu prints ping statistics: every request answered.
            m = re.search(r"(\d+) packets transmitted in [0-9.]+ seconds, (\d+) packets received", out)
            assert m, out[-3000:] + r.log.read_text()
            assert int(m.group(1)) >= 25 and m.group(1) == m.group(2), out[-3000:]
        stats = r.json("show", "gtp", "statistics")
        assert stats["creates"].get("128", 0) == 8, stats
        # sgsnemu deletes its contexts when it stops: all gone, every address back.
        wait_until(lambda: r.json("show", "gtp", "contexts")["total"] == 0, 10,
                   what="the contexts deleted")
        apn = r.json("show", "apn")[0]
        assert (apn["name"], apn["ipv4_in_use"]) == ("internet", 0), apn
        drops = r.drops()
        assert not {k: v for k, v in drops.items() if "Gtp" in k}, drops
        # `clear gtp context`: a third sgsnemu's one idle context deleted here, its address
        # free again.
        idle = sgsnemu(testbed, sgsn, 2, contexts=1, pings=0)
        held = wait_until(lambda: r.json("show", "gtp", "contexts")["contexts"], 5,
                          what="sgsnemu 2's context")
        r.cli("clear", "gtp", "context", hex(held[0]["teid"]))
        assert r.json("show", "gtp", "contexts")["total"] == 0
        assert r.json("show", "apn")[0]["ipv4_in_use"] == 0
        idle.stop()
        # A G-PDU for a TEID nobody has: an Error Indication comes back from 2152.
        with sgsn.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("10.0.0.2", 2152))
            s.settimeout(3)
            inner = ipv4_header("10.64.9.9", "10.1.0.2")
            g = struct.pack("!BBHI", 0x30, 255, len(inner), 0xDEADBEEF) + inner
            s.sendto(g, ("10.0.0.1", 2152))
            reply, _ = s.recvfrom(2048)
        assert reply[1] == 26, reply.hex()
        assert b"\x10\xde\xad\xbe\xef" in reply, reply.hex()
    finally:
        r.stop()
        cap.stop()
    rows = read_fields(cap.pcap, ["gtp.message", "_ws.expert.severity", "icmp.type"],
                       display_filter="gtp")
    kinds = {row[0] for row in rows}
    assert {"0x10", "0x11", "0xff"} <= kinds, kinds
    assert not any(row[1] for row in rows), "malformed GTP"
    assert any(row[0] == "0xff" and row[2] == "0" for row in rows), "an echo reply in a tunnel"
