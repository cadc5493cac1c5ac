"""System test: ATM PVCs through the real `linerate` binary, decoded by tshark.

A SunATM capture (pcap link type 123: a 4-byte pseudo-header with the VC, then the AAL5 SDU) built
here feeds port a0, whose PVC 0/32 is LLC/SNAP; the router routes between it and two PVCs of port
a1 (1/40 LLC/SNAP, 1/41 VC-multiplexed IPv4) and writes a SunATM capture of what a1 sends. tshark
decodes that capture on its own (ATM, LLC, IP, UDP): every packet on the right VC, TTL or hop
limit one less, no malformed frame and no expert warning. What cannot be routed is counted by
reason in `linerate run --json`. A config mistake in an `atm` block is named with its line.
"""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

from test_pcap_inputs import inet_checksum as checksum

CONFIG = """\
router: { workers: 1 }
ports:
  - { name: a0, driver: pcap, media: atm, rx: in.pcap }
  - { name: a1, driver: pcap, media: atm, tx: out.pcap }
interfaces:
  - { name: a0.32, port: a0, atm: { vpi: 0, vci: 32 }, ipv4: [10.0.0.1/30], ipv6: ["2001:db8:a::1/64"] }
  - { name: a1.40, port: a1, atm: { vpi: 1, vci: 40 }, ipv4: [10.1.0.1/30], ipv6: ["2001:db8:b::1/64"] }
  - { name: a1.41, port: a1, atm: { vpi: 1, vci: 41, encap: vc-mux-ipv4 }, ipv4: [10.2.0.1/30] }
routes:
  - { prefix: 172.16.0.0/16, via: 10.1.0.2 }
  - { prefix: 172.17.0.0/16, via: 10.2.0.2 }
  - { prefix: "2001:db8:ff::/48", via: "2001:db8:b::2" }
"""

LLC_IP4 = bytes.fromhex("aaaa030000000800")
LLC_IP6 = bytes.fromhex("aaaa0300000086dd")


def udp4(dst: str, ttl: int, n: int) -> bytes:
    payload = bytes(i & 0xFF for i in range(n))
    udp = struct.pack("!HHHH", 50001, 60001, 8 + n, 0) + payload
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, ttl, 17, 0,
                    bytes([10, 0, 0, 2]), bytes(int(x) for x in dst.split(".")))
    h = h[:10] + struct.pack("!H", checksum(h)) + h[12:]
    return h + udp


def udp6(dst: bytes, hlim: int, n: int) -> bytes:
    payload = bytes(i & 0xFF for i in range(n))
    src = bytes.fromhex("20010db8000a00000000000000000002")
    udp = struct.pack("!HHHH", 50001, 60001, 8 + n, 0) + payload
    pseudo = src + dst + struct.pack("!IxxxB", len(udp), 17)
    udp = udp[:6] + struct.pack("!H", checksum(pseudo + udp)) + udp[8:]
    return struct.pack("!IHBB", 6 << 28, len(udp), 17, hlim) + src + dst + udp


def sunatm(vpi: int, vci: int, sdu: bytes) -> bytes:
    return bytes([0x02, vpi]) + struct.pack("!H", vci) + sdu


def write_pcap(path: Path, records: list[bytes]) -> None:
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 123))
        for i, r in enumerate(records):
            f.write(struct.pack("<IIII", 0, i, len(r), len(r)) + r)


def test_pvcs_route_and_tshark_decodes_what_leaves(tmp_path: Path, linerate_bin: Path,
                                                   tshark: str) -> None:
    dst6 = bytes.fromhex("20010db800ff00000000000000000005")
    records = (
        [sunatm(0, 32, LLC_IP4 + udp4("172.16.1.1", 64, 100 + i)) for i in range(20)]
        + [sunatm(0, 32, LLC_IP4 + udp4("172.17.0.9", 9, 30)) for _ in range(5)]
        + [sunatm(0, 32, LLC_IP6 + udp6(dst6, 30, 64)) for _ in range(5)]
        # Not routable: an unknown VC, an LLC header that is not IP (ARP's PID).
        + [sunatm(3, 99, LLC_IP4 + udp4("172.16.1.1", 64, 40))]
        + [sunatm(0, 32, bytes.fromhex("aaaa030000000806") + bytes(28))]
    )
    write_pcap(tmp_path / "in.pcap", records)
    (tmp_path / "router.yaml").write_text(CONFIG)
    run = subprocess.run([str(linerate_bin), "run", str(tmp_path / "router.yaml"), "--json"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    counters = json.loads(run.stdout)
    drops = counters["drops"]
    assert drops.get("UnknownVc") == 1, counters
    assert drops.get("AtmNotIp") == 1, counters

    fields = ["atm.vpi", "atm.vci", "llc.type", "ip.dst", "ip.ttl", "ipv6.hlim",
              "udp.length", "_ws.malformed", "_ws.expert"]
    out = subprocess.run(
        [tshark, "-r", str(tmp_path / "out.pcap"), "-T", "fields", "-E", "separator=|"]
        + [a for f in fields for a in ("-e", f)],
        capture_output=True, text=True, timeout=60, check=True).stdout
    rows = [dict(zip(fields, line.split("|"))) for line in out.splitlines()]
    assert len(rows) == 30, out
    assert all(r["_ws.malformed"] == "" and r["_ws.expert"] == "" for r in rows), out
    to16 = [r for r in rows if r["ip.dst"] == "172.16.1.1"]
    assert len(to16) == 20
    assert all((r["atm.vpi"], r["atm.vci"]) == ("1", "40") for r in to16)
    assert all(r["llc.type"] == "0x0800" and r["ip.ttl"] == "63" for r in to16)
    assert sorted(int(r["udp.length"]) for r in to16) == [8 + 100 + i for i in range(20)]
    mux = [r for r in rows if r["ip.dst"] == "172.17.0.9"]
    assert len(mux) == 5
    # VC-multiplexed: no LLC header (the pseudo-header's traffic type is "unknown", and tshark
    # reads the payload as the IPv4 it is).
    assert all((r["atm.vpi"], r["atm.vci"], r["llc.type"]) == ("1", "41", "") for r in mux)
    assert all(r["ip.ttl"] == "8" for r in mux)
    v6 = [r for r in rows if r["ipv6.hlim"]]
    assert len(v6) == 5
    assert all((r["atm.vci"], r["llc.type"], r["ipv6.hlim"]) == ("40", "0x86dd", "29") for r in v6)


def test_an_atm_mistake_is_named_with_its_line(tmp_path: Path, linerate_bin: Path) -> None:
    bad = CONFIG.replace("atm: { vpi: 1, vci: 41, encap: vc-mux-ipv4 }",
                         "atm: { vpi: 1, vci: 5, class: vbr, pcr: 100 }")
    (tmp_path / "router.yaml").write_text(bad)
    r = subprocess.run([str(linerate_bin), "check", str(tmp_path / "router.yaml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "router.yaml:8:" in r.stderr, r.stderr
    assert "interfaces[2].atm.vci" in r.stderr and "reserved" in r.stderr, r.stderr
    assert "VBR VC needs `pcr`, `scr` and `mbs`" in r.stderr, r.stderr
