"""L2 devices under test for `linerate bench external --switching`: one topology, three switches.

    tester namespace                 DUT namespace
    linerate bench external   t0 == d0   (a) the Linux bridge (br0 over d0..dN)
      --switching ...         t1 == d1   (b) a Linerate daemon bridging on af_packet ports
                              t2 == d2   (c) Open vSwitch, userspace datapath (netdev)

Every veth end has IPv6 off (no kernel chatter for the switches to learn). Each device gives a
`flush` shell command (run by the tester, in the tester's namespace) that empties its table.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

from .netns import Netns, Testbed, wait_until

OVS_SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")


def topology(testbed: Testbed, nports: int = 3) -> tuple[Netns, Netns]:
    tst, dut = testbed.netns("tester"), testbed.netns("dut")
    for i in range(nports):
        testbed.veth(tst, f"t{i}", dut, f"d{i}")
        tst.sysctl({f"net.ipv6.conf.t{i}.disable_ipv6": 1})
        dut.sysctl({f"net.ipv6.conf.d{i}.disable_ipv6": 1})
    return tst, dut


def dut_yaml(nports: int) -> str:
    """An L2 device as the tester sees it: ports, nothing else."""
    lines = ["ports:"]
    lines += [f"  - {{ name: p{i}, driver: af_packet, device: d{i} }}" for i in range(nports)]
    return "\n".join(lines) + "\n"


class LinuxBridge:
    """br0 in the DUT namespace over d0..dN, STP off (ports forward at once). With `snooping`:
    IGMP snooping with the bridge as querier (without a querier Linux floods every group),
    unregistered groups not flooded (`mcast_flood off`) and fast leave on d1..dN, as a
    Linerate bridge with `igmp-snooping: { flood-unregistered: false, fast-leave: [...] }`."""

    name = "linux-bridge"

    def __init__(self, dut: Netns, nports: int, snooping: bool = False) -> None:
        self.dut = dut
        extra = ["mcast_snooping", "1"] if snooping else []
        dut.ip("link", "add", "br0", "type", "bridge", "stp_state", "0", "ageing_time", "30000",
               *extra)
        if snooping:
            # The bridge's own querier counts only a query response interval after it is
            # enabled (10 s by default): until then Linux floods every group (measured). With
            # a 1 s interval, set first, the wait below covers it.
            dut.ip("link", "set", "br0", "type", "bridge", "mcast_query_response_interval", "100")
            dut.ip("link", "set", "br0", "type", "bridge", "mcast_querier", "1")
        dut.sysctl({"net.ipv6.conf.br0.disable_ipv6": 1})
        for i in range(nports):
            dut.ip("link", "set", f"d{i}", "master", "br0")
            if snooping:
                dut.run(["bridge", "link", "set", "dev", f"d{i}", "mcast_flood", "off"])
                if i > 0:
                    dut.run(["bridge", "link", "set", "dev", f"d{i}", "fastleave", "on"])
        dut.up("br0")
        if snooping:
            time.sleep(1.5)
        self.flush = f"ip -n {dut.name} link set br0 type bridge fdb_flush"

    def learned(self) -> int:
        fdb = json.loads(subprocess.run(["bridge", "-n", self.dut.name, "-j", "fdb", "show",
                                         "br", "br0"], capture_output=True, text=True,
                                        check=True).stdout or "[]")
        return sum(1 for e in fdb if "permanent" not in e.get("state", "")
                   and "self" not in e.get("flags", []))

    def stop(self) -> None:
        pass


class LinerateDaemon:
    """`linerate daemon` in the DUT namespace with config `lines`, started and waited for."""

    name = "linerate"

    def __init__(self, bin_: Path, dut: Netns, workdir: Path, lines: list[str],
                 sock: Path | None = None) -> None:
        self.bin = bin_
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "router.yaml"
        self.config.write_text("\n".join(lines) + "\n")
        self.sock, self.log = sock or workdir / "api.sock", workdir / "daemon.log"
        self.proc = dut.popen([str(bin_), "daemon", "--config", str(self.config), "--no-state",
                               "--socket", str(self.sock)], log=self.log, name="linerate")
        wait_until(lambda: self.sock.exists() or not self.proc.running, 20,
                   what="the daemon's API socket")
        if not self.proc.running:
            raise RuntimeError(self.log.read_text())

    def cli_json(self, *args: str):
        r = subprocess.run([str(self.bin), "--socket", str(self.sock), *args, "--json"],
                           capture_output=True, text=True, timeout=30, check=True)
        return json.loads(r.stdout)

    def stop(self) -> None:
        self.proc.stop()


class LinerateBridge(LinerateDaemon):
    """`linerate daemon` in the DUT namespace: one bridge domain over p0..pN (af_packet on
    d0..dN), with `limits: { macs }` as its table's size."""

    def __init__(self, bin_: Path, dut: Netns, workdir: Path, nports: int, macs: int,
                 workers: int = 1, mac_limit: int = 0, snooping: bool = False) -> None:
        members = ", ".join(f"p{i}" for i in range(nports))
        cfg = [f"router: {{ workers: {workers} }}", f"limits: {{ macs: {macs} }}", "ports:"]
        cfg += [f"  - {{ name: p{i}, driver: af_packet, device: d{i} }}" for i in range(nports)]
        cfg += ["interfaces:"]
        cfg += [f'  - {{ name: p{i}, port: p{i}, mac: "02:00:00:00:0d:{i + 1:02x}" }}'
                for i in range(nports)]
        snoop = ""
        if snooping:
            leave = ", ".join(f"p{i}" for i in range(1, nports))
            snoop = (", igmp-snooping: { flood-unregistered: false, "
                     f"fast-leave: [{leave}] }}")
        cfg += ["bridges:", f"  - {{ name: lan, id: 10, members: [{members}], learning: true, "
                f"mac-limit: {mac_limit}, aging: 300{snoop} }}"]
        super().__init__(bin_, dut, workdir, cfg)
        self.flush = f"{bin_} --socket {self.sock} clear mac address-table --bridge lan"


def ovs_available() -> str | None:
    """None if Open vSwitch's programs are here, else what is missing."""
    missing = [p for p in ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl",
                           "ovs-appctl") if shutil.which(p) is None]
    if missing or not OVS_SCHEMA.exists():
        return "missing: " + ", ".join(missing or [str(OVS_SCHEMA)])
    return None


class OvsNetdev:
    """ovsdb-server and ovs-vswitchd started by hand in the DUT namespace (no systemd, no
    kernel module): bridge br0 with datapath_type=netdev, d0..dN as ports of type system."""

    name = "ovs-netdev"

    def __init__(self, dut: Netns, workdir: Path, nports: int, macs: int | None = None) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.dir = workdir
        self.dut = dut
        db, self.db_sock = workdir / "conf.db", workdir / "db.sock"
        subprocess.run(["ovsdb-tool", "create", str(db), str(OVS_SCHEMA)], check=True,
                       capture_output=True, text=True)
        env = {"OVS_RUNDIR": str(workdir), "OVS_LOGDIR": str(workdir), "OVS_DBDIR": str(workdir),
               "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        self.env = env
        self.dbp = dut.popen(["ovsdb-server", str(db), f"--remote=punix:{self.db_sock}",
                              f"--pidfile={workdir / 'ovsdb-server.pid'}",
                              f"--unixctl={workdir / 'ovsdb-server.ctl'}"],
                             log=workdir / "ovsdb-server.log", name="ovsdb-server", env=env)
        wait_until(lambda: self.db_sock.exists() or not self.dbp.running, 10,
                   what="ovsdb-server's socket")
        self.vsctl("--no-wait", "init")
        self.ctl = workdir / "ovs-vswitchd.ctl"
        self.vsp = dut.popen(["ovs-vswitchd", f"unix:{self.db_sock}",
                              f"--pidfile={workdir / 'ovs-vswitchd.pid'}",
                              f"--unixctl={self.ctl}"],
                             log=workdir / "ovs-vswitchd.log", name="ovs-vswitchd", env=env)
        wait_until(lambda: self.ctl.exists() or not self.vsp.running, 15,
                   what="ovs-vswitchd's control socket")
        if not self.vsp.running:
            raise RuntimeError((workdir / "ovs-vswitchd.log").read_text())
        self.vsctl("add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev")
        if macs is not None:
            self.vsctl("set", "bridge", "br0", f"other_config:mac-table-size={macs}")
        for i in range(nports):
            self.vsctl("add-port", "br0", f"d{i}")
        dut.up("br0")
        self.flush = f"ovs-appctl -t {self.ctl} fdb/flush br0"

    def vsctl(self, *args: str) -> str:
        r = self.dut.run(["ovs-vsctl", f"--db=unix:{self.db_sock}", "--timeout=20", *args])
        return r.stdout

    def appctl(self, *args: str) -> str:
        return subprocess.run(["ovs-appctl", "-t", str(self.ctl), *args], capture_output=True,
                              text=True, check=True, timeout=30).stdout

    def stop(self) -> None:
        for p in (self.vsp, self.dbp):
            p.stop()


def bench(bin_: Path, tst: Netns, dut_file: Path, nports: int, out: Path, procedures: str,
          flush: str | None, *extra: str, timeout: float = 600) -> dict:
    """`linerate bench external --switching PROCEDURES` in the tester namespace; returns the
    JSON report (with the table under `_md`)."""
    argv = [str(bin_), "bench", "external", "--dut", str(dut_file), "--switching", procedures,
            "--out", str(out)]
    for i in range(nports):
        argv += ["--port", f"p{i}=t{i}"]
    if flush:
        argv += ["--flush", flush]
    argv += list(extra)
    p = tst.run(argv, check=False, timeout=timeout)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.log").write_text(f"{' '.join(argv)}\n{p.stdout}\n{p.stderr}")
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(argv)}\n{p.stdout}\n{p.stderr}")
    rep = json.loads((out / "switching.json").read_text())
    rep["_md"] = (out / "switching.md").read_text()
    return rep


def bench_multicast(bin_: Path, tst: Netns, dut_file: Path, nports: int, out: Path,
                    *extra: str, timeout: float = 600) -> dict:
    """`linerate bench external --multicast` in the tester namespace; returns the JSON report
    (with the table under `_md`)."""
    argv = [str(bin_), "bench", "external", "--dut", str(dut_file), "--multicast",
            "--out", str(out)]
    for i in range(nports):
        argv += ["--port", f"p{i}=t{i}"]
    argv += list(extra)
    p = tst.run(argv, check=False, timeout=timeout)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.log").write_text(f"{' '.join(argv)}\n{p.stdout}\n{p.stderr}")
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(argv)}\n{p.stdout}\n{p.stderr}")
    rep = json.loads((out / "multicast.json").read_text())
    rep["_md"] = (out / "multicast.md").read_text()
    return rep
