"""System test: MPLS through the real `linerate` binary, pcap in and out, decoded by tshark.

A provider edge with a core port (MPLS, its neighbour 198.51.100.2), an access port with a
VLAN pseudowire (VC type 4, control word) and a VPN customer's VLAN, and a port-mode
pseudowire (type 5, no control word):
- labelled frames from the core: 100 swapped to 200, 101 popped (penultimate hop), 102 popped
  into VRF `cust` and routed to the customer, 1000 and 1001 the pseudowires' frames out to
  their attachment circuits, 555 unknown (dropped and counted);
- the attachment circuits' frames go over their pseudowires: 300/2000 with the control word,
  2001 alone;
- IPv4 to 10.9.0.0/16 from the access port leaves labelled 16/17.

tshark decodes every frame the core receives: the label stacks, the IP packets under them, the
pseudowire's control word and the Ethernet frame it carries; nothing malformed or warned about.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from scapy.contrib.mpls import MPLS
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw
from scapy.utils import rdpcap, wrpcap

from conftest import ensure_tshark

CONFIG = """\
router: { workers: 1 }
vrfs: [cust]
ports:
  - { name: core, driver: pcap, rx: core-in.pcap, tx: core-out.pcap }
  - { name: acc, driver: pcap, rx: acc-in.pcap, tx: acc-out.pcap }
  - { name: raw, driver: pcap, rx: raw-in.pcap, tx: raw-out.pcap }
interfaces:
  - { name: core, port: core, mac: "02:00:00:00:01:01", ipv4: [198.51.100.1/24] }
  - { name: acc, port: acc, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24] }
  - { name: acc.100, port: acc, vlan: 100, mac: "02:00:00:00:00:01" }
  - { name: acc.200, port: acc, vlan: 200, vrf: cust, mac: "02:00:00:00:00:01",
      ipv4: [203.0.113.1/24] }
  - { name: raw, port: raw, mac: "02:00:00:00:02:01" }
neighbors:
  - { interface: core, ip: 198.51.100.2, mac: "02:00:00:00:01:02" }
  - { interface: acc, ip: 192.0.2.2, mac: "02:00:00:00:00:02" }
  - { interface: acc.200, ip: 203.0.113.2, mac: "02:00:00:00:00:03" }
routes:
  - { prefix: 10.9.0.0/16, via: 198.51.100.2, labels: [16, 17] }
  - { prefix: 10.50.0.0/16, vrf: cust, via: 203.0.113.2 }
mpls:
  interfaces: [core]
  labels:
    - { in: 100, out: [200], via: 198.51.100.2 }
    - { in: 101, out: pop, via: 198.51.100.2 }
    - { in: 102, lookup: cust }
  pseudowires:
    - { name: pw-vlan, interface: acc.100, peer: 10.255.0.2, vc-id: 100, local-label: 1000,
        remote-label: 2000, transport: [300], via: 198.51.100.2, control-word: true }
    - { name: pw-port, interface: raw, peer: 10.255.0.2, vc-id: 5, local-label: 1001,
        remote-label: 2001, via: 198.51.100.2 }
"""

CORE_MAC, CORE_PEER = "02:00:00:00:01:01", "02:00:00:00:01:02"
ACC_MAC = "02:00:00:00:00:01"
H1, H2 = "02:00:00:cc:00:01", "02:00:00:cc:00:02"  # customer hosts either side of a PW


def udp(dst: str, i: int, ttl: int = 64) -> IP:
    return IP(src="192.0.2.2", dst=dst, ttl=ttl) / UDP(sport=50000 + i, dport=60000) / (
        bytes([i]) * 26)


def labelled(*labels: tuple[int, int]) -> Ether:
    """A frame from the core neighbour with these (label, TTL), the last at the bottom."""
    f = Ether(src=CORE_PEER, dst=CORE_MAC)
    for i, (label, ttl) in enumerate(labels):
        f = f / MPLS(label=label, ttl=ttl, s=int(i == len(labels) - 1))
    return f


def test_labels_and_pseudowires_are_switched_and_decoded(linerate_bin: Path, tmp_path: Path):
    tshark = ensure_tshark()
    cust_frame = Ether(src=H1, dst=H2) / Dot1Q(vlan=100) / udp("10.1.1.1", 9)
    raw_frame = Ether(src=H1, dst=H2) / udp("10.1.1.1", 10)
    far_frame = Ether(src=H2, dst=H1) / Dot1Q(vlan=7) / udp("10.1.1.2", 11)
    core_in = [
        labelled((100, 64)) / udp("10.1.1.1", 1),
        labelled((101, 20)) / udp("10.1.1.1", 2),
        labelled((102, 64)) / udp("10.50.0.9", 3),
        labelled((555, 64)) / udp("10.1.1.1", 4),
        labelled((1000, 255)) / Raw(b"\0\0\0\0") / far_frame,
        labelled((1001, 255)) / raw_frame,
    ]
    acc_in = [cust_frame, Ether(src="02:00:00:00:00:02", dst=ACC_MAC) / udp("10.9.0.1", 5)]
    wrpcap(str(tmp_path / "core-in.pcap"), core_in, linktype=1)
    wrpcap(str(tmp_path / "acc-in.pcap"), acc_in, linktype=1)
    wrpcap(str(tmp_path / "raw-in.pcap"), [raw_frame], linktype=1)
    (tmp_path / "router.yaml").write_text(CONFIG)
    proc = subprocess.run([str(linerate_bin), "run", str(tmp_path / "router.yaml"), "--json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats["drops"] == {"MplsUnknownLabel": 1}, stats["drops"]

    core_out = [bytes(p) for p in rdpcap(str(tmp_path / "core-out.pcap"))]
    acc_out = [bytes(p) for p in rdpcap(str(tmp_path / "acc-out.pcap"))]
    raw_out = [bytes(p) for p in rdpcap(str(tmp_path / "raw-out.pcap"))]
    # Out to the customers: the far end's frame with the attachment circuit's VLAN; the VPN
    # packet routed out of acc.200; the port-mode frame as it came.
    want_ac = bytes(Ether(src=H2, dst=H1) / Dot1Q(vlan=100) / udp("10.1.1.2", 11))
    assert want_ac in acc_out, acc_out
    vpn = [Ether(f) for f in acc_out if Ether(f).haslayer(Dot1Q) and Ether(f)[Dot1Q].vlan == 200]
    assert len(vpn) == 1 and vpn[0][IP].dst == "10.50.0.9" and vpn[0][IP].ttl == 63
    assert len(acc_out) == 2, acc_out
    assert raw_out == [bytes(raw_frame)]
    # Out of the core: byte for byte where the router builds the whole frame.
    pw_vlan = bytes(Ether(src=CORE_MAC, dst=CORE_PEER) / MPLS(label=300, ttl=255, s=0)
                    / MPLS(label=2000, ttl=255, s=1) / Raw(b"\0\0\0\0") / cust_frame)
    pw_port = bytes(Ether(src=CORE_MAC, dst=CORE_PEER) / MPLS(label=2001, ttl=255, s=1)
                    / raw_frame)
    assert pw_vlan in core_out and pw_port in core_out, core_out
    assert len(core_out) == 5, core_out

    # A pseudowire without a control word cannot be told from one with it by its bytes (the
    # frame's MAC address may start with a 0 nibble, as here): tshark is told, as an operator
    # would tell it, that 2001 carries Ethernet with no control word.
    decode = ["-d", "mpls.label==2001,pwethnocw"]

    def fields(path: Path, *names: str) -> list[list[str]]:
        out = subprocess.run(
            [tshark, "-n", *decode, "-r", str(path), "-T", "fields", "-E", "separator=\t",
             "-E", "occurrence=a", "-E", "aggregator=,", *sum((["-e", n] for n in names), [])],
            capture_output=True, text=True, check=True, timeout=60).stdout
        return [line.split("\t") for line in out.splitlines()]

    # The label stacks and what tshark finds under them.
    rows = fields(tmp_path / "core-out.pcap", "mpls.label", "mpls.ttl", "ip.dst", "ip.ttl",
                  "eth.dst")
    by_labels = {r[0]: r for r in rows}
    assert by_labels["200"][1:4] == ["63", "10.1.1.1", "64"], rows
    assert by_labels["16,17"][1:4] == ["63,63", "10.9.0.1", "63"], rows
    assert by_labels[""][2:4] == ["10.1.1.1", "19"], rows  # popped: the label's TTL less one
    assert by_labels["300,2000"][2] == "10.1.1.1", rows
    assert H2 in by_labels["300,2000"][4].split(","), rows
    assert by_labels["2001"][2] == "10.1.1.1", rows
    assert by_labels["2001"][4] == f"{CORE_PEER},{H2}", rows
    for name in ("core-out", "acc-out", "raw-out"):
        bad = subprocess.run(
            [tshark, "-n", *decode, "-r", str(tmp_path / f"{name}.pcap"), "-Y",
             "_ws.malformed || _ws.expert.severity >= warning"],
            capture_output=True, text=True, check=True, timeout=60).stdout
        assert not bad.strip(), (name, bad)
