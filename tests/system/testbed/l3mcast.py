"""Multicast routers under test for `linerate bench external --multicast`, both run by FRR's
pimd: the Linux kernel's multicast routing, and a Linerate daemon whose TAP twins pimd runs on.

    tester namespace                   DUT namespace
    linerate bench external   t0 == d0   source side: 10.200.255.254/16 (the tester's sources
      --multicast ...                    are 10.200.0.x), PIM
                              t1..tN == d1..dN   receivers: 10.77.i.1/24 (the tester's hosts
                                                 are 10.77.i.2), PIM and IGMP

The tester's hosts join with IGMPv2 (one report per group), so the groups are PIM-SM's, not
SSM's (FRR 8.4 has no SSM mapping for IGMPv2 joins): the router is its own rendezvous point
(`ip pim rp 10.223.255.254 224.0.0.0/4`) and, the only PIM router on the source's link, its
designated router. A source's first packets reach pimd as the kernel's upcall; pimd installs
the (S,G) with the receivers' interfaces inherited from the (*,G) the joins made.
"""

from __future__ import annotations

from pathlib import Path

from . import frr as frrmod
from . import l2
from .netns import Netns, Testbed, wait_until

RP = "10.223.255.254"


def addresses(nports: int) -> list[str]:
    return [f"{RP}/11"] + [f"10.77.{i}.1/24" for i in range(1, nports)]


def pimd_config(ifnames: list[str]) -> str:
    lines = [f"ip pim rp {RP} 224.0.0.0/4", "!"]
    for i, name in enumerate(ifnames):
        lines += [f"interface {name}", " ip pim"]
        if i > 0:
            # FRR 8.4 has no immediate leave: the shortest last-member query time (0.1 s, once).
            lines += [" ip igmp", " ip igmp version 2", " ip igmp last-member-query-count 1",
                      " ip igmp last-member-query-interval 1"]
        lines += ["!"]
    return "\n".join(lines) + "\n"


def wait_pim(frr, ifnames: list[str]) -> None:
    def up() -> bool:
        out = frr.vtysh("show ip pim interface", daemon="pimd")
        return all(n in out for n in ifnames)
    wait_until(up, 30, what="pimd on every interface",
               diagnostics=lambda: frr.vtysh("show ip pim interface", daemon="pimd"))


class LinuxMrouter:
    """The DUT namespace's kernel routes multicast, d0..dN its interfaces, pimd programming it."""

    name = "linux-pimd"

    def __init__(self, testbed: Testbed, dut: Netns, nports: int) -> None:
        self.dut = dut
        dut.sysctl({"net.ipv4.ip_forward": 1, "net.ipv4.conf.all.rp_filter": 0,
                    "net.ipv4.conf.default.rp_filter": 0})
        for i, a in enumerate(addresses(nports)):
            dut.sysctl({f"net.ipv4.conf.d{i}.rp_filter": 0})
            dut.addr(f"d{i}", a)
            dut.up(f"d{i}")
        names = [f"d{i}" for i in range(nports)]
        self.frr = testbed.frr(dut, {"zebra": frrmod.zebra_config(),
                                     "pimd": pimd_config(names)})
        wait_pim(self.frr, names)

    def routes(self) -> int:
        return sum(1 for line in self.dut.run(["ip", "mroute"]).stdout.splitlines()
                   if line.startswith("("))

    def stop(self) -> None:
        self.frr.stop()


class LinerateMrouter(l2.LinerateDaemon):
    """`linerate daemon` in the DUT namespace on af_packet ports p0..pN (d0..dN), each a routed
    interface with a TAP twin (lr-pI) that pimd runs on; the twins' kernel multicast cache is
    mirrored into Linerate's multicast FIB."""

    name = "linerate-pimd"

    def __init__(self, bin_: Path, testbed: Testbed, dut: Netns, workdir: Path, nports: int,
                 workers: int = 1) -> None:
        for i in range(nports):
            dut.up(f"d{i}")
        cfg = [f"router: {{ workers: {workers} }}", "ports:"]
        cfg += [f"  - {{ name: p{i}, driver: af_packet, device: d{i} }}" for i in range(nports)]
        cfg += ["interfaces:"]
        cfg += [f'  - {{ name: p{i}, port: p{i}, mac: "02:00:00:00:0e:{i + 1:02x}", '
                f"ipv4: [{a}] }}" for i, a in enumerate(addresses(nports))]
        cfg += ["control-plane:", "  taps: true", "multicast-routing: true"]
        super().__init__(bin_, dut, workdir, cfg)
        names = [f"lr-p{i}" for i in range(nports)]
        self.frr = testbed.frr(dut, {"zebra": frrmod.zebra_config(),
                                     "pimd": pimd_config(names)})
        wait_pim(self.frr, names)

    def routes(self) -> int:
        return len(self.cli_json("show", "ip", "mroute")["routes"])

    def stop(self) -> None:
        self.frr.stop()
        super().stop()
