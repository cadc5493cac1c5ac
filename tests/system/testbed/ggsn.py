"""What the GGSN tests and the GGSN bench share: OsmoGGSN's config, and the GGSN as the tester
sees it (DUT.yaml) for GG-1 (Gn 10.0.0.1, Gi 10.1.0.1) and GG-2 (the second GGSN at 10.2.0.1
and 10.3.0.1). The tester emulates the SGSN's user plane on Gn (.2) and a server on Gi (.2)."""

from __future__ import annotations

from pathlib import Path

# The tester's MACs on Gn and Gi (GG-2's second GGSN: 1e, 1f).
T_MAC = ["02:00:00:00:0e:02", "02:00:00:00:0f:02"]

DUT_YAML = f"""\
ports:
  - {{ name: gn, driver: af_packet, device: d0 }}
  - {{ name: gi, driver: af_packet, device: d1 }}
interfaces:
  - {{ name: gn, port: gn, ipv4: [10.0.0.1/24] }}
  - {{ name: gi, port: gi, ipv4: [10.1.0.1/24] }}
neighbors:
  - {{ interface: gn, ip: 10.0.0.2, mac: "{T_MAC[0]}" }}
  - {{ interface: gi, ip: 10.1.0.2, mac: "{T_MAC[1]}" }}
"""

GG2_DUT_YAML = f"""\
ports:
  - {{ name: gna, driver: af_packet, device: d0 }}
  - {{ name: gia, driver: af_packet, device: d1 }}
  - {{ name: gnb, driver: af_packet, device: d2 }}
  - {{ name: gib, driver: af_packet, device: d3 }}
interfaces:
  - {{ name: gna, port: gna, ipv4: [10.0.0.1/24] }}
  - {{ name: gia, port: gia, ipv4: [10.1.0.1/24] }}
  - {{ name: gnb, port: gnb, ipv4: [10.2.0.1/24] }}
  - {{ name: gib, port: gib, ipv4: [10.3.0.1/24] }}
neighbors:
  - {{ interface: gna, ip: 10.0.0.2, mac: "{T_MAC[0]}" }}
  - {{ interface: gia, ip: 10.1.0.2, mac: "{T_MAC[1]}" }}
  - {{ interface: gnb, ip: 10.2.0.2, mac: "02:00:00:00:1e:02" }}
  - {{ interface: gib, ip: 10.3.0.2, mac: "02:00:00:00:1f:02" }}
"""


def osmo_ggsn_config(state: Path, prefix: str = "10.64.0.0/12") -> str:
    """OsmoGGSN on 10.0.0.1, APN `internet` with a tun user plane (no kernel GTP here) and the
    pool `prefix` routed into the tun; its VTY on loopback only."""
    return f"""\
log stderr
 logging filter all 1
 logging print category 1
 logging level ggsn notice
 logging level lgtp notice
line vty
 no login
 bind 127.0.0.1
ggsn ggsn0
 gtp state-dir {state}
 gtp bind-ip 10.0.0.1
 apn internet
  gtpu-mode tun
  tun-device tun4
  type-support v4
  ip prefix dynamic {prefix}
  ip ifconfig {prefix}
  no shutdown
 default-apn internet
 no shutdown ggsn
"""
