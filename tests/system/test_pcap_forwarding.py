"""System test: pcap in, pcap out, through the real `linerate` binary.

One run of `linerate run CONFIG --json` (shared by the tests of this module) forwards a capture
built here with scapy through port p0; the tests then check the JSON counters, every frame in the
output captures (byte for byte where the result is fully determined), and let tshark look for
malformed packets, expert warnings and bad checksums. The last tests check `linerate check` on
configs with mistakes.

The traffic sent into p0 (all from 192.0.2.2 / 2001:db8:1::2, MAC 02:00:00:00:00:02, to p0's MAC):

| frames | what                                   | expected                                   |
| ---    | ---                                    | ---                                        |
| 100    | IPv4 UDP to 10.1.0.0/16                | out p1 untagged, to 02:00:00:00:01:02      |
| 50     | IPv4 UDP to 10.100.0.0/16              | out p1, 802.1Q VID 100, to 02:00:00:00:01:03 |
| 50     | IPv6 UDP to 2001:db8:ff::/48           | out p1 untagged, to 02:00:00:00:01:02      |
| 1      | IPv4 UDP to 10.1.1.1, 60 B frame       | out p1 (64 B on the wire with the FCS)     |
| 1      | IPv4 UDP to 10.1.1.2, 1400 B frame, DF | out p1                                     |
| 1      | IPv4 TTL 1                             | TtlExpired; ICMP 11/0 out p0               |
| 1      | IPv6 hop limit 1                       | TtlExpired; ICMPv6 3/0 out p0              |
| 1      | IPv4 to 172.16.0.1                     | NoRoute; ICMP 3/0 out p0                   |
| 1      | IPv4 with a bad header checksum        | Ip4BadChecksum; nothing sent               |
| 1      | ICMP echo request to 192.0.2.1         | echo reply out p0                          |
| 1      | IPv4 to 10.66.1.1                      | Blackhole; nothing sent                    |
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import re
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from scapy.layers.inet import ICMP, IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.utils import rdpcap, wrpcap

RUN_TIMEOUT = 120  # seconds; the run drains ~200 frames, it should take well under a second

# Addresses of the test network.
P0_MAC = "02:00:00:00:00:01"
P1_MAC = "02:00:00:00:01:01"
SENDER_MAC = "02:00:00:00:00:02"  # neighbour 192.0.2.2 and 2001:db8:1::2 on p0
P1_NEIGH_MAC = "02:00:00:00:01:02"  # 198.51.100.2 and 2001:db8:2::2 on p1
VLAN_NEIGH_MAC = "02:00:00:00:01:03"  # 203.0.113.2 on p1.100
SENDER4 = "192.0.2.2"
SENDER6 = "2001:db8:1::2"
P0_IP4 = "192.0.2.1"
P0_IP6 = "2001:db8:1::1"
SPORT, DPORT = 50001, 60001  # no Wireshark dissector claims these, so payloads stay "data"

KNOWN_DROP_REASONS = {
    "NotForUs", "UnknownEthertype", "UnknownVlan", "InterfaceDown", "BadLength", "Ip4BadHeader",
    "Ip4BadChecksum", "Ip4Martian", "Ip6BadHeader", "Ip6Scope", "TtlExpired", "NoRoute",
    "Blackhole", "Reject", "NeighborUnresolved", "MtuExceeded", "LocalUnhandled", "TxQueueFull",
    "NoBuffer",
}

CONFIG_TEMPLATE = """\
# Linerate system test: pcap in on p0, pcap out on p0 and p1.
router: {{ workers: 1, icmp-rate: 1000 }}
ports:
  - {{ name: p0, driver: pcap, rx: {rx0}, tx: {tx0} }}
  - {{ name: p1, driver: pcap, tx: {tx1} }}
interfaces:
  - {{ name: p0, port: p0, mac: "02:00:00:00:00:01", mtu: 1500, ipv4: [{p0_ipv4}], ipv6: ["2001:db8:1::1/64"] }}
  - {{ name: p1, port: p1, mac: "02:00:00:00:01:01", mtu: 1500, ipv4: [198.51.100.1/24], ipv6: ["2001:db8:2::1/64"] }}
  - {{ name: p1.100, port: p1, vlan: 100, mac: "02:00:00:00:01:01", ipv4: [203.0.113.1/24] }}
neighbors:
  - {{ interface: p0, ip: 192.0.2.2, mac: "02:00:00:00:00:02" }}
  - {{ interface: p0, ip: "2001:db8:1::2", mac: "02:00:00:00:00:02" }}
  - {{ interface: p1, ip: 198.51.100.2, mac: "02:00:00:00:01:02" }}
  - {{ interface: p1, ip: "2001:db8:2::2", mac: "02:00:00:00:01:02" }}
  - {{ interface: p1.100, ip: 203.0.113.2, mac: "02:00:00:00:01:03" }}
routes:
  - {{ prefix: 10.0.0.0/8, via: 198.51.100.2 }}
  - {{ prefix: 10.100.0.0/16, via: 203.0.113.2 }}
  - {{ prefix: "2001:db8:ff::/48", via: "2001:db8:2::2" }}
  - {{ prefix: 10.66.0.0/16, blackhole: true }}
"""

N_V4, N_VLAN, N_V6 = 100, 50, 50
STATIC_ROUTES_V4, STATIC_ROUTES_V6 = 3, 1
ADDRS_V4, ADDRS_V6 = 3, 2  # interface addresses in the config
NEIGHBORS_V4, NEIGHBORS_V6 = 3, 2


def write_config(folder: Path, name: str = "router.yaml", p0_ipv4: str = "192.0.2.1/24",
                 rx0: str = "in0.pcap", tx0: str = "out0.pcap", tx1: str = "out1.pcap") -> Path:
    path = folder / name
    path.write_text(CONFIG_TEMPLATE.format(p0_ipv4=p0_ipv4, rx0=rx0, tx0=tx0, tx1=tx1))
    return path


# ---------------------------------------------------------------------------------------------
# Checksums and byte helpers


def ones_sum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def inet_checksum(data: bytes) -> int:
    return ~ones_sum(data) & 0xFFFF


def ip4_header_checksum(header: bytes) -> int:
    """The checksum a correct implementation computes for this header (its own field ignored)."""
    return inet_checksum(header[:10] + b"\0\0" + header[12:])


def icmp6_checksum(src: bytes, dst: bytes, msg: bytes) -> int:
    pseudo = src + dst + struct.pack("!IxxxB", len(msg), 58)
    return inet_checksum(pseudo + msg[:2] + b"\0\0" + msg[4:])


def mac_bytes(m: str) -> bytes:
    return bytes.fromhex(m.replace(":", ""))


def mac_str(b: bytes) -> str:
    return ":".join(f"{x:02x}" for x in b)


def decrement_ttl4(ip: bytes) -> bytes:
    """What a router must send for a forwarded IPv4 packet: TTL-1 and a recomputed checksum."""
    ihl = (ip[0] & 0x0F) * 4
    hdr = bytearray(ip[:ihl])
    hdr[8] -= 1
    hdr[10:12] = b"\0\0"
    hdr[10:12] = struct.pack("!H", inet_checksum(bytes(hdr)))
    return bytes(hdr) + ip[ihl:]


def decrement_hlim6(ip: bytes) -> bytes:
    b = bytearray(ip)
    b[7] -= 1
    return bytes(b)


# ---------------------------------------------------------------------------------------------
# The input capture


@dataclass
class Sent:
    kind: str  # fwd4 | vlan4 | fwd6 | min | large | ttl1 | hl1 | noroute | badsum | echo | blackhole
    frame: bytes
    tag: bytes = b""  # unique 8-byte marker at the start of the UDP payload

    @property
    def ip(self) -> bytes:
        return self.frame[14:]


def tag_for(i: int) -> bytes:
    return b"LRT%05d" % i


def payload(tag: bytes, n: int) -> bytes:
    """n bytes starting with the tag; the rest a pattern that varies with the tag."""
    assert n >= len(tag)
    seed = sum(tag)
    body = bytes((seed + k * 7) & 0xFF for k in range(n - len(tag)))
    return tag + body


def udp4(tag: bytes, dst: str, size: int, ttl: int = 64, ip_id: int = 1, tos: int = 0,
         df: bool = False, frame_len: int | None = None, **ipkw) -> bytes:
    """An IPv4 UDP frame from the sender to p0; size is the UDP payload length, or frame_len
    sets the whole frame's length."""
    if frame_len is not None:
        size = frame_len - 14 - 20 - 8
    p = (Ether(dst=P0_MAC, src=SENDER_MAC)
         / IP(src=SENDER4, dst=dst, ttl=ttl, id=ip_id, tos=tos, flags="DF" if df else 0, **ipkw)
         / UDP(sport=SPORT, dport=DPORT)
         / payload(tag, size))
    b = bytes(p)
    if frame_len is not None:
        assert len(b) == frame_len, (len(b), frame_len)
    return b


def udp6(tag: bytes, dst: str, size: int, hlim: int = 64, tc: int = 0, fl: int = 0) -> bytes:
    p = (Ether(dst=P0_MAC, src=SENDER_MAC)
         / IPv6(src=SENDER6, dst=dst, hlim=hlim, tc=tc, fl=fl)
         / UDP(sport=SPORT, dport=DPORT)
         / payload(tag, size))
    return bytes(p)


def id_giving_checksum(dst: str, size: int, ttl: int, want_after: int | None = None,
                       want_before: int | None = None) -> int:
    """An IP id for which the header checksum is `want_before` as sent, or `want_after` once
    the TTL is decremented: corner cases of incremental checksum updates (RFC 1624)."""
    hdr = bytearray(udp4(b"LRT99999", dst, size, ttl=ttl, ip_id=0)[14:34])
    for ip_id in range(65536):
        hdr[4:6] = struct.pack("!H", ip_id)
        before = ip4_header_checksum(bytes(hdr))
        hdr[8] -= 1
        after = ip4_header_checksum(bytes(hdr))
        hdr[8] += 1
        if (want_before is not None and before == want_before) or (
                want_after is not None and after == want_after):
            return ip_id
    raise AssertionError("no IP id gives that checksum")


def build_input() -> list[Sent]:
    sent: list[Sent] = []
    n = 0

    def next_tag() -> bytes:
        nonlocal n
        n += 1
        return tag_for(n)

    ttls4 = [64, 2, 255, 128, 30, 17]
    # 100 IPv4 frames to 10.1.0.0/16, all sizes and header values varied. Two of them hit the
    # checksum corner cases: 0x0000 after the decrement, and 0x0000 as received.
    corner_after = id_giving_checksum("10.1.0.98", 40, 64, want_after=0x0000)
    corner_before = id_giving_checksum("10.1.0.99", 40, 64, want_before=0x0000)
    for i in range(N_V4):
        tag = next_tag()
        dst = f"10.1.{i // 200}.{i % 200 + 1}"
        if i == 97:
            f = udp4(tag, "10.1.0.98", 40, ttl=64, ip_id=corner_after)
        elif i == 98:
            f = udp4(tag, "10.1.0.99", 40, ttl=64, ip_id=corner_before)
        else:
            f = udp4(tag, dst, 18 + (i * 37) % 900, ttl=ttls4[i % len(ttls4)],
                     ip_id=(i * 2654435761) & 0xFFFF, tos=(i * 4) & 0xFC, df=bool(i % 2))
        sent.append(Sent("fwd4", f, tag))
    for i in range(N_VLAN):
        tag = next_tag()
        sent.append(Sent("vlan4", udp4(tag, f"10.100.{i}.{i + 1}", 18 + (i * 53) % 700,
                                       ttl=ttls4[i % len(ttls4)], ip_id=0xBEEF ^ i, df=True), tag))
    for i in range(N_V6):
        tag = next_tag()
        sent.append(Sent("fwd6", udp6(tag, f"2001:db8:ff:{i:x}::{i + 1:x}", 8 + (i * 41) % 800,
                                      hlim=[64, 2, 255, 128][i % 4], tc=(i * 8) & 0xFF,
                                      fl=(i * 12345) & 0xFFFFF), tag))
    tag = next_tag()
    sent.append(Sent("min", udp4(tag, "10.1.1.1", 0, frame_len=60), tag))
    tag = next_tag()
    sent.append(Sent("large", udp4(tag, "10.1.1.2", 0, frame_len=1400, df=True), tag))
    tag = next_tag()
    sent.append(Sent("ttl1", udp4(tag, "10.1.2.1", 64, ttl=1, ip_id=0x7777), tag))
    tag = next_tag()
    sent.append(Sent("hl1", udp6(tag, "2001:db8:ff:99::1", 64, hlim=1), tag))
    tag = next_tag()
    sent.append(Sent("noroute", udp4(tag, "172.16.0.1", 64, ttl=64, ip_id=0x4242), tag))
    tag = next_tag()
    good = udp4(tag, "10.1.3.1", 64, ttl=64, ip_id=0x1111)
    good_sum = struct.unpack("!H", good[24:26])[0]
    bad = udp4(tag, "10.1.3.1", 64, ttl=64, ip_id=0x1111, chksum=good_sum ^ 0x5A5A)
    assert bad[:24] == good[:24] and bad[26:] == good[26:] and bad[24:26] != good[24:26]
    sent.append(Sent("badsum", bad, tag))
    echo = (Ether(dst=P0_MAC, src=SENDER_MAC) / IP(src=SENDER4, dst=P0_IP4, ttl=64, id=0x2222)
            / ICMP(type=8, code=0, id=0x1234, seq=7) / payload(b"LRTECHO!", 56))
    sent.append(Sent("echo", bytes(echo)))
    tag = next_tag()
    sent.append(Sent("blackhole", udp4(tag, "10.66.1.1", 64, ttl=64), tag))

    # Mix the special frames in among the forwarded ones, the same way every run.
    random.Random(20240601).shuffle(sent)
    return sent


FORWARDED_KINDS = ("fwd4", "vlan4", "fwd6", "min", "large")


# ---------------------------------------------------------------------------------------------
# The output captures


@dataclass
class Out:
    """One frame from an output capture, split into its layers (by hand, so nothing is guessed)."""
    index: int
    frame: bytes
    dst: str
    src: str
    vlan: int | None  # VID if 802.1Q-tagged
    tpid_ok: bool
    pcp_dei: int
    ethertype: int
    l3: bytes  # from the IP header to the end of the frame (padding included)

    @property
    def ip(self) -> bytes:
        """The IP packet without Ethernet padding."""
        if self.ethertype == 0x0800 and len(self.l3) >= 20:
            return self.l3[:struct.unpack("!H", self.l3[2:4])[0]]
        if self.ethertype == 0x86DD and len(self.l3) >= 40:
            return self.l3[:40 + struct.unpack("!H", self.l3[4:6])[0]]
        return self.l3

    def udp_tag(self) -> bytes | None:
        ip = self.ip
        if self.ethertype == 0x0800 and len(ip) >= 20 and ip[9] == 17:
            off = (ip[0] & 0x0F) * 4 + 8
        elif self.ethertype == 0x86DD and len(ip) >= 40 and ip[6] == 17:
            off = 48
        else:
            return None
        t = ip[off:off + 8]
        return t if t.startswith(b"LRT") else None

    def describe(self) -> str:
        return f"frame #{self.index + 1} ({len(self.frame)} B): {Ether(self.frame).summary()}"


def read_capture(path: Path) -> list[Out]:
    assert path.is_file(), f"{path} was not written"
    outs = []
    for i, pkt in enumerate(rdpcap(str(path))):
        b = bytes(pkt)
        assert len(b) >= 14, f"{path.name} frame #{i + 1} is only {len(b)} bytes"
        et = struct.unpack("!H", b[12:14])[0]
        vlan, tpid_ok, pcp_dei, l3 = None, True, 0, b[14:]
        if et == 0x8100:
            tci, et = struct.unpack("!HH", b[14:18])
            vlan, pcp_dei, l3 = tci & 0x0FFF, tci >> 12, b[18:]
        elif et == 0x88A8:
            tpid_ok = False
        outs.append(Out(i, b, mac_str(b[0:6]), mac_str(b[6:12]), vlan, tpid_ok, pcp_dei, et, l3))
    return outs


@dataclass
class Run:
    folder: Path
    config: Path
    sent: list[Sent]
    proc: subprocess.CompletedProcess
    out0_path: Path
    out1_path: Path
    by_kind: dict = field(default_factory=dict)

    def one(self, kind: str) -> Sent:
        (s,) = self.by_kind[kind]
        return s

    def stats(self) -> dict:
        assert self.proc.returncode == 0, (
            f"linerate run exited {self.proc.returncode}\nstderr:\n{self.proc.stderr[-4000:]}"
            f"\nstdout:\n{self.proc.stdout[-2000:]}")
        try:
            doc = json.loads(self.proc.stdout)
        except json.JSONDecodeError as e:
            raise AssertionError(f"stdout is not one JSON object ({e}):\n{self.proc.stdout[-3000:]}")
        assert isinstance(doc, dict), f"stdout JSON is a {type(doc).__name__}, not an object"
        return doc

    def port(self, name: str) -> dict:
        ports = self.stats()["ports"]
        found = [p for p in ports if p.get("name") == name]
        assert len(found) == 1, f"expected one port named {name} in {ports}"
        return found[0]

    def out0(self) -> list[Out]:
        return read_capture(self.out0_path)

    def out1(self) -> list[Out]:
        return read_capture(self.out1_path)


@pytest.fixture(scope="module")
def run(linerate_bin: Path, tmp_path_factory) -> Run:
    folder = tmp_path_factory.mktemp("pcap_forwarding")
    sent = build_input()
    wrpcap(str(folder / "in0.pcap"), [Ether(s.frame) for s in sent], linktype=1)
    # Sanity of our own input: scapy wrote exactly these bytes.
    assert [bytes(p) for p in rdpcap(str(folder / "in0.pcap"))] == [s.frame for s in sent]
    config = write_config(folder)
    # Run from another folder: the capture paths in the config are relative to its own folder.
    cwd = tmp_path_factory.mktemp("elsewhere")
    proc = subprocess.run([str(linerate_bin), "run", str(config), "--json"], cwd=cwd,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    r = Run(folder, config, sent, proc, folder / "out0.pcap", folder / "out1.pcap")
    for s in sent:
        r.by_kind.setdefault(s.kind, []).append(s)
    assert len(r.by_kind["fwd4"]) == N_V4 and len(r.by_kind["vlan4"]) == N_VLAN
    assert len(r.by_kind["fwd6"]) == N_V6
    return r


def forwarded(run: Run) -> list[Sent]:
    return [s for s in run.sent if s.kind in FORWARDED_KINDS]


def egress_l2(s: Sent) -> tuple[str, int | None]:
    """(neighbour MAC, VLAN) a forwarded frame must leave with."""
    if s.kind == "vlan4":
        return VLAN_NEIGH_MAC, 100
    return P1_NEIGH_MAC, None


def expected_forwarded_frame(s: Sent) -> bytes:
    dst, vlan = egress_l2(s)
    ethertype = s.frame[12:14]
    ip = decrement_hlim6(s.ip) if s.kind == "fwd6" else decrement_ttl4(s.ip)
    tag = b"" if vlan is None else struct.pack("!HH", 0x8100, vlan)
    return mac_bytes(dst) + mac_bytes(P1_MAC) + tag + ethertype + ip


# ---------------------------------------------------------------------------------------------
# 1. The run and its JSON


def test_run_exits_zero_with_one_json_object(run: Run):
    doc = run.stats()
    assert run.proc.stdout.strip().startswith("{") and run.proc.stdout.strip().endswith("}")
    for key in ("ports", "drops", "icmp_sent", "icmp_rate_limited", "echo_replies", "routes"):
        assert key in doc, f"JSON lacks {key!r}: {doc}"
    assert "panick" not in run.proc.stderr.lower(), run.proc.stderr


def test_input_is_what_the_outline_says(run: Run):
    """Guards the test itself: the capture holds the frames the expectations below assume."""
    counts = {k: len(v) for k, v in run.by_kind.items()}
    assert counts == {"fwd4": 100, "vlan4": 50, "fwd6": 50, "min": 1, "large": 1, "ttl1": 1,
                      "hl1": 1, "noroute": 1, "badsum": 1, "echo": 1, "blackhole": 1}
    assert len(run.one("min").frame) == 60  # 64 bytes on the wire with the FCS
    assert len(run.one("large").frame) == 1400
    tags = [s.tag for s in run.sent if s.tag]
    assert len(tags) == len(set(tags))


def test_port_counters(run: Run):
    p0, p1 = run.port("p0"), run.port("p1")
    assert len(run.stats()["ports"]) == 2, run.stats()["ports"]
    fwd = forwarded(run)
    exp_p1_bytes = sum(len(s.frame) + (4 if s.kind == "vlan4" else 0) for s in fwd)
    assert (p0["rx_packets"], p0["rx_bytes"]) == (len(run.sent), sum(len(s.frame) for s in run.sent))
    assert (p1["rx_packets"], p1["rx_bytes"]) == (0, 0)
    assert p1["tx_packets"] == len(fwd) == 202
    assert p1["tx_bytes"] == exp_p1_bytes
    # p0 sends the 3 ICMP errors and the echo reply; the errors' length depends on how much of
    # the offending packet they quote (checked frame by frame below), so the bytes are checked
    # against the capture.
    assert p0["tx_packets"] == 4
    out0 = run.out0()
    assert p0["tx_bytes"] == sum(len(o.frame) for o in out0)
    assert p1["tx_bytes"] == sum(len(o.frame) for o in run.out1())


def test_drop_counters(run: Run):
    drops = run.stats()["drops"]
    unknown = set(drops) - KNOWN_DROP_REASONS
    assert not unknown, f"unknown drop reasons {unknown} in {drops}"
    assert all(v != 0 for v in drops.values()), f"zero-valued reasons listed: {drops}"
    assert drops == {"TtlExpired": 2, "NoRoute": 1, "Ip4BadChecksum": 1, "Blackhole": 1}


def test_icmp_counters(run: Run):
    doc = run.stats()
    assert doc["icmp_sent"] == 3  # time exceeded (v4), time exceeded (v6), unreachable
    assert doc["echo_replies"] == 1
    assert doc["icmp_rate_limited"] == 0  # 3 errors are far below icmp-rate: 1000


def test_route_counts(run: Run):
    routes = run.stats()["routes"]
    # At least the static routes; at most those plus, per interface address, a subnet and a local
    # route, and per neighbour a host route (what a router may count is not fixed further).
    assert STATIC_ROUTES_V4 <= routes["ipv4"] <= STATIC_ROUTES_V4 + 2 * ADDRS_V4 + NEIGHBORS_V4, routes
    assert STATIC_ROUTES_V6 <= routes["ipv6"] <= STATIC_ROUTES_V6 + 2 * ADDRS_V6 + NEIGHBORS_V6, routes


def test_added_routes_are_counted_and_used(run: Run, linerate_bin: Path, tmp_path: Path):
    """Two more IPv4 routes and one more IPv6 route raise the counts by exactly that, and the
    formerly unroutable 172.16.0.1 is now forwarded (the counts are not constants)."""
    base = run.stats()["routes"]
    config = write_config(tmp_path)
    config.write_text(config.read_text() + (
        "  - { prefix: 172.16.0.0/12, via: 198.51.100.2 }\n"
        "  - { prefix: 10.200.0.0/16, blackhole: true }\n"
        '  - { prefix: "2001:db8:ee::/48", via: "2001:db8:2::2" }\n'))
    sent = run.one("noroute")
    wrpcap(str(tmp_path / "in0.pcap"), [Ether(sent.frame)], linktype=1)
    r = subprocess.run([str(linerate_bin), "run", str(config), "--json"], capture_output=True,
                       text=True, timeout=RUN_TIMEOUT, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["routes"] == {"ipv4": base["ipv4"] + 2, "ipv6": base["ipv6"] + 1}, (base, doc["routes"])
    assert doc["drops"] == {} and doc["icmp_sent"] == 0, doc
    (o,) = read_capture(tmp_path / "out1.pcap")
    assert o.frame == mac_bytes(P1_NEIGH_MAC) + mac_bytes(P1_MAC) + b"\x08\x00" + decrement_ttl4(sent.ip)
    assert read_capture(tmp_path / "out0.pcap") == []


# ---------------------------------------------------------------------------------------------
# 2. Forwarded frames, out of p1


def _p1_by_tag(run: Run) -> dict[bytes, list[Out]]:
    got: dict[bytes, list[Out]] = {}
    for o in run.out1():
        got.setdefault(o.udp_tag(), []).append(o)
    return got


def test_p1_carries_exactly_the_forwarded_frames(run: Run):
    got = _p1_by_tag(run)
    untagged = got.pop(None, [])
    assert not untagged, "frames on p1 that are not test traffic:\n" + "\n".join(
        o.describe() for o in untagged)
    dup = {t: len(v) for t, v in got.items() if len(v) > 1}
    assert not dup, f"frames sent more than once on p1: {dup}"
    kind_of = {s.tag: s.kind for s in run.sent if s.tag}
    want = {s.tag for s in forwarded(run)}
    missing = sorted(f"{kind_of[t]} {t.decode()}" for t in want - set(got))
    extra = sorted(f"{kind_of.get(t, '?')} {t.decode()}" for t in set(got) - want)
    assert not missing, f"forwarded frames missing on p1: {missing}"
    assert not extra, f"frames on p1 that must not have been forwarded: {extra}"


@pytest.mark.parametrize("kind", FORWARDED_KINDS)
def test_forwarded_frames_are_rewritten_correctly(run: Run, kind: str):
    got = _p1_by_tag(run)
    sends = run.by_kind[kind]
    checked = 0
    problems = []
    for s in sends:
        outs = got.get(s.tag)
        if not outs:
            problems.append(f"{s.tag.decode()}: not forwarded")
            continue
        o = outs[0]
        want_dst, want_vlan = egress_l2(s)
        is6 = kind == "fwd6"
        p = []
        if o.dst != want_dst:
            p.append(f"dst MAC {o.dst}, expected {want_dst}")
        if o.src != P1_MAC:
            p.append(f"src MAC {o.src}, expected {P1_MAC}")
        if o.vlan != want_vlan or not o.tpid_ok:
            p.append(f"VLAN {o.vlan}, expected {want_vlan}")
        if o.ethertype != (0x86DD if is6 else 0x0800):
            p.append(f"ethertype {o.ethertype:#06x}")
        ip_in, ip_out = s.ip, o.ip
        if is6:
            if len(ip_out) >= 8 and ip_out[7] != ip_in[7] - 1:
                p.append(f"hop limit {ip_out[7]}, expected {ip_in[7] - 1} (sent {ip_in[7]})")
            if ip_out[:7] + ip_out[8:] != ip_in[:7] + ip_in[8:]:
                p.append("IPv6 header or payload changed beyond the hop limit")
        else:
            if len(ip_out) >= 20:
                if ip_out[8] != ip_in[8] - 1:
                    p.append(f"TTL {ip_out[8]}, expected {ip_in[8] - 1} (sent {ip_in[8]})")
                want_sum = ip4_header_checksum(ip_out[:20])
                got_sum = struct.unpack("!H", ip_out[10:12])[0]
                if got_sum != want_sum:
                    p.append(f"IPv4 header checksum {got_sum:#06x}, expected {want_sum:#06x} "
                             f"(sent {struct.unpack('!H', ip_in[10:12])[0]:#06x} with TTL {ip_in[8]})")
            if ip_out[:8] + ip_out[9:10] + ip_out[12:] != ip_in[:8] + ip_in[9:10] + ip_in[12:]:
                p.append("IPv4 header or payload changed beyond TTL and checksum")
        if o.frame != expected_forwarded_frame(s):
            p.append(f"frame differs from the expected bytes: got {len(o.frame)} B, "
                     f"expected {len(expected_forwarded_frame(s))} B")
        if p:
            problems.append(f"{s.tag.decode()} ({o.describe()}): " + "; ".join(p))
        checked += 1
    assert not problems, f"{len(problems)} of {len(sends)} {kind} frames wrong:\n" + "\n".join(
        problems[:20])
    assert checked == len(sends)


def test_ipv4_checksum_corner_cases_are_exact(run: Run):
    """RFC 1624: an incremental update must give 0x0000, never 0xFFFF, when that is the sum."""
    got = _p1_by_tag(run)
    fwd4 = run.by_kind["fwd4"]
    after = [s for s in fwd4 if struct.unpack("!H", decrement_ttl4(s.ip)[10:12])[0] == 0]
    before = [s for s in fwd4 if s.ip[10:12] == b"\0\0"]
    assert after and before, "the input lacks its checksum corner cases"
    for s in after + before:
        (o,) = got[s.tag]
        want = decrement_ttl4(s.ip)[10:12]
        assert o.ip[10:12] == want, (
            f"{s.tag.decode()}: sent checksum {s.ip[10:12].hex()} TTL {s.ip[8]}, forwarded with "
            f"checksum {o.ip[10:12].hex()}, expected {want.hex()}")


def test_no_dropped_or_local_frame_leaks_out(run: Run):
    """No frame that must be dropped or answered locally is sent out as it is."""
    leak_kinds = ("ttl1", "hl1", "noroute", "badsum", "blackhole", "echo")
    for o in run.out0() + run.out1():
        if o.udp_tag() is None:
            continue
        kind = next((s.kind for s in run.sent if s.tag == o.udp_tag()), "?")
        assert kind not in leak_kinds, f"{kind} frame was sent out: {o.describe()}"


# ---------------------------------------------------------------------------------------------
# 3. What p0 sends back: ICMP errors and the echo reply


def _p0_frames(run: Run) -> list[Out]:
    outs = run.out0()
    assert len(outs) == 4, f"expected 4 frames out of p0, got {len(outs)}:\n" + "\n".join(
        o.describe() for o in outs)
    for o in outs:
        assert (o.dst, o.src, o.vlan) == (SENDER_MAC, P0_MAC, None), o.describe()
    return outs


def _icmp4(outs: list[Out], icmp_type: int) -> tuple[Out, bytes, bytes]:
    found = [o for o in outs if o.ethertype == 0x0800 and len(o.ip) >= 28 and o.ip[9] == 1
             and o.ip[(o.ip[0] & 0xF) * 4] == icmp_type]
    assert len(found) == 1, f"expected one ICMP type {icmp_type} out of p0, got " + "; ".join(
        o.describe() for o in outs)
    o = found[0]
    ihl = (o.ip[0] & 0xF) * 4
    return o, o.ip[:ihl], o.ip[ihl:]


def _check_ip4_reply_header(o: Out, hdr: bytes):
    ip = o.ip
    assert ip[0] >> 4 == 4
    assert len(o.l3) >= struct.unpack("!H", ip[2:4])[0], "IPv4 total length beyond the frame"
    assert str(ipaddress.IPv4Address(hdr[12:16])) == P0_IP4, f"source {ipaddress.IPv4Address(hdr[12:16])}"
    assert str(ipaddress.IPv4Address(hdr[16:20])) == SENDER4, f"dest {ipaddress.IPv4Address(hdr[16:20])}"
    assert hdr[8] > 1, f"reply TTL {hdr[8]}"
    got, want = struct.unpack("!H", hdr[10:12])[0], ip4_header_checksum(hdr)
    assert got == want, f"reply IPv4 header checksum {got:#06x}, expected {want:#06x}"


def _check_icmp4_error(run: Run, icmp_type: int, code: int, kind: str):
    o, hdr, icmp = _icmp4(_p0_frames(run), icmp_type)
    _check_ip4_reply_header(o, hdr)
    orig = run.one(kind).ip
    assert icmp[1] == code, f"ICMP code {icmp[1]}, expected {code}"
    assert inet_checksum(icmp) == 0, f"bad ICMP checksum {icmp[2:4].hex()}"
    assert icmp[4:8] == b"\0\0\0\0", f"unused field {icmp[4:8].hex()}"
    quote = icmp[8:]
    assert quote[:20] == orig[:20], (
        f"quoted header {quote[:20].hex()} is not the original {orig[:20].hex()}")
    # RFC 792: the header and at least the first 64 bits of the data; RFC 1812: at most 576 B.
    assert len(quote) >= 28, f"quote is {len(quote)} bytes, needs header + 8"
    assert quote == orig[:len(quote)], "quote is not a prefix of the original datagram"
    assert len(o.ip) <= 576, f"ICMP error datagram is {len(o.ip)} bytes"


def test_icmp_time_exceeded_v4(run: Run):
    _check_icmp4_error(run, 11, 0, "ttl1")


def test_icmp_net_unreachable(run: Run):
    _check_icmp4_error(run, 3, 0, "noroute")


def test_icmpv6_time_exceeded(run: Run):
    outs = _p0_frames(run)
    found = [o for o in outs if o.ethertype == 0x86DD]
    assert len(found) == 1, "expected one IPv6 frame out of p0: " + "; ".join(
        o.describe() for o in outs)
    o = found[0]
    ip = o.ip
    orig = run.one("hl1").ip
    src, dst = ip[8:24], ip[24:40]
    assert ipaddress.IPv6Address(src) == ipaddress.IPv6Address(P0_IP6), ipaddress.IPv6Address(src)
    assert ipaddress.IPv6Address(dst) == ipaddress.IPv6Address(SENDER6), ipaddress.IPv6Address(dst)
    assert ip[6] == 58, f"next header {ip[6]}, expected ICMPv6 (58)"
    assert ip[7] > 1, f"hop limit {ip[7]}"
    msg = ip[40:]
    assert len(msg) == struct.unpack("!H", ip[4:6])[0]
    assert (msg[0], msg[1]) == (3, 0), f"ICMPv6 type/code {msg[0]}/{msg[1]}, expected 3/0"
    want = icmp6_checksum(src, dst, msg)
    assert msg[2:4] == struct.pack("!H", want), f"ICMPv6 checksum {msg[2:4].hex()}, expected {want:#06x}"
    assert msg[4:8] == b"\0\0\0\0", f"unused field {msg[4:8].hex()}"
    quote = msg[8:]
    assert quote[:40] == orig[:40], f"quoted header {quote[:40].hex()} is not {orig[:40].hex()}"
    assert len(quote) >= 48 and quote == orig[:len(quote)], "quote is not the original packet's start"
    # RFC 4443: as much as fits without exceeding the minimum MTU; our packet fits whole.
    assert len(ip) <= 1280
    assert quote == orig, f"quoted {len(quote)} of {len(orig)} bytes though all fit in 1280"


def test_echo_reply(run: Run):
    o, hdr, icmp = _icmp4(_p0_frames(run), 0)
    _check_ip4_reply_header(o, hdr)
    req = run.one("echo").ip
    req_icmp = req[20:]
    assert icmp[1] == 0, f"code {icmp[1]}"
    assert inet_checksum(icmp) == 0, f"bad ICMP checksum {icmp[2:4].hex()}"
    assert icmp[4:8] == req_icmp[4:8], f"id/seq {icmp[4:8].hex()}, expected {req_icmp[4:8].hex()}"
    assert icmp[8:] == req_icmp[8:], "echo data not returned unchanged"
    assert len(o.frame) == len(run.one("echo").frame)


# ---------------------------------------------------------------------------------------------
# 4. tshark's view of the output captures


def _tshark(tshark: str, *args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([tshark, *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"tshark {' '.join(args)} exited {r.returncode}: {r.stderr}"
    return r


def _stderr_problems(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines()
            if ln.strip() and not ln.startswith("Running as user")]


CHECKSUM_PREFS = ("-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE")
BAD_CHECKSUM_FILTER = ('ip.checksum.status == "Bad" or icmp.checksum.status == "Bad" or '
                       'udp.checksum.status == "Bad" or icmpv6.checksum.status == "Bad"')


def _expert_sections(stdout: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^(Errors|Warns|Notes|Chats|Comments) \((\d+)\)", stdout, re.M)}


@pytest.mark.parametrize("capture", ["out0.pcap", "out1.pcap"])
def test_tshark_finds_no_malformed_packets(run: Run, tshark: str, capture: str):
    path = run.folder / capture
    n = len(read_capture(path))
    r = _tshark(tshark, "-r", str(path), "-V", *CHECKSUM_PREFS)
    assert not _stderr_problems(r.stderr), r.stderr
    frames = re.findall(r"^Frame \d+: ", r.stdout, re.M)
    assert len(frames) == n, f"tshark dissected {len(frames)} frames, scapy read {n}"
    bad = [ln.strip() for ln in r.stdout.splitlines()
           if "Malformed" in ln or "Expert Info (Error" in ln or "Expert Info (Warning" in ln]
    assert not bad, f"{capture}: " + "\n".join(bad[:20])


@pytest.mark.parametrize("capture", ["out0.pcap", "out1.pcap"])
def test_tshark_expert_has_no_errors_or_warnings(run: Run, tshark: str, capture: str):
    r = _tshark(tshark, "-r", str(run.folder / capture), "-q", "-z", "expert,warn", *CHECKSUM_PREFS)
    assert not _stderr_problems(r.stderr), r.stderr
    sections = _expert_sections(r.stdout)
    assert not sections.get("Errors") and not sections.get("Warns"), f"{capture}:\n{r.stdout}"


@pytest.mark.parametrize("capture", ["out0.pcap", "out1.pcap"])
def test_tshark_finds_no_bad_checksums(run: Run, tshark: str, capture: str):
    r = _tshark(tshark, "-r", str(run.folder / capture), *CHECKSUM_PREFS, "-Y", BAD_CHECKSUM_FILTER)
    assert not _stderr_problems(r.stderr), r.stderr
    assert r.stdout.strip() == "", f"{capture}: packets with bad checksums:\n{r.stdout}"


def test_tshark_checks_do_catch_a_bad_checksum(run: Run, tshark: str):
    """Control for the two tests above: on the input, which holds one packet with a bad IPv4
    header checksum, the same filter and expert report find exactly that packet."""
    path = str(run.folder / "in0.pcap")
    r = _tshark(tshark, "-r", path, *CHECKSUM_PREFS, "-Y", BAD_CHECKSUM_FILTER,
                "-T", "fields", "-e", "frame.number")
    bad_index = next(i for i, s in enumerate(run.sent) if s.kind == "badsum")
    assert r.stdout.split() == [str(bad_index + 1)]
    r = _tshark(tshark, "-r", path, "-q", "-z", "expert,warn", *CHECKSUM_PREFS)
    assert _expert_sections(r.stdout).get("Errors") == 1, r.stdout


# ---------------------------------------------------------------------------------------------
# 5. `linerate check`

ERROR_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<field>[^:\s]+): (?P<msg>.+)$")


def _check(linerate_bin: Path, config: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(linerate_bin), "check", str(config)], capture_output=True,
                          text=True, timeout=60, cwd=config.parent)


def _errors(stderr: str) -> list[re.Match]:
    return [m for m in map(ERROR_LINE.match, stderr.splitlines()) if m]


def _line_of(text: str, needle: str) -> tuple[int, str]:
    hits = [(i + 1, ln) for i, ln in enumerate(text.splitlines()) if needle in ln]
    assert len(hits) == 1, f"{needle!r} should be on exactly one line"
    return hits[0]


def test_check_accepts_the_valid_config(linerate_bin: Path, tmp_path: Path):
    config = write_config(tmp_path)
    for name in ("in0.pcap", "out0.pcap", "out1.pcap"):
        (tmp_path / name).touch()
    r = _check(linerate_bin, config)
    assert r.returncode == 0, f"exit {r.returncode}; stderr:\n{r.stderr}"
    assert not _errors(r.stderr), r.stderr


def test_check_reports_bad_ipv4_prefix_with_file_line_and_field(linerate_bin: Path, tmp_path: Path):
    config = write_config(tmp_path, "bad-prefix.yaml", p0_ipv4="192.0.2.300/24")
    text = config.read_text()
    lineno, line = _line_of(text, "192.0.2.300/24")
    r = _check(linerate_bin, config)
    assert r.returncode == 1, f"exit {r.returncode}; stderr:\n{r.stderr}"
    errs = _errors(r.stderr)
    assert errs, f"no FILE:LINE:COL: FIELD: message line in stderr:\n{r.stderr}"
    hits = [m for m in errs if m["field"] == "interfaces[0].ipv4[0]"]
    assert hits, f"no error names interfaces[0].ipv4[0]:\n{r.stderr}"
    m = hits[0]
    assert Path(m["file"]).name == config.name, f"file {m['file']!r}, expected {config}"
    assert int(m["line"]) == lineno, f"line {m['line']}, expected {lineno}: {line!r}"
    want_col = line.index("192.0.2.300/24") + 1
    assert int(m["col"]) == want_col, f"column {m['col']}, expected {want_col} (the bad value)"
    assert m["msg"].strip()


def test_check_rejects_unknown_key_naming_it(linerate_bin: Path, tmp_path: Path):
    config = write_config(tmp_path, "bad-key.yaml")
    text = config.read_text().replace("mtu: 1500, ipv4: [192.0.2.1/24]",
                                      "mtuu: 1500, ipv4: [192.0.2.1/24]")
    assert text.count("mtuu") == 1
    config.write_text(text)
    lineno, _ = _line_of(text, "mtuu")
    r = _check(linerate_bin, config)
    assert r.returncode == 1, f"exit {r.returncode}; stderr:\n{r.stderr}"
    errs = [m for m in _errors(r.stderr) if "mtuu" in m["field"] or "mtuu" in m["msg"]]
    assert errs, f"no FILE:LINE:COL: FIELD: message line names `mtuu`:\n{r.stderr}"
    m = errs[0]
    assert Path(m["file"]).name == config.name
    assert int(m["line"]) == lineno, f"line {m['line']}, expected {lineno}"
    assert m["field"].startswith("interfaces[0]"), f"field {m['field']!r}"


def test_run_refuses_an_invalid_config(linerate_bin: Path, tmp_path: Path):
    """`run` validates like `check`: it names the bad field and exits non-zero."""
    config = write_config(tmp_path, "bad-prefix.yaml", p0_ipv4="192.0.2.300/24")
    wrpcap(str(tmp_path / "in0.pcap"), [Ether(build_input()[0].frame)], linktype=1)
    r = subprocess.run([str(linerate_bin), "run", str(config), "--json"], capture_output=True,
                       text=True, timeout=RUN_TIMEOUT, cwd=tmp_path)
    assert r.returncode != 0, f"run accepted an invalid config; stdout:\n{r.stdout}"
    assert "interfaces[0].ipv4[0]" in r.stderr, r.stderr
