"""An FRR 8.4 instance per namespace: zebra plus whichever of bgpd, ospfd, ospf6d, staticd a
test asks for, each with its own pid file, zserv socket, vty socket directory, config and log in
a run directory owned by user frr.

    frr = tb.frr(b, {
        "zebra": zebra_config(fpm=True),
        "bgpd": bgp_config(65002, "192.0.2.2", [("192.0.2.1", 65001)]),
    }, fpm=True)
    frr.wait_bgp_established("192.0.2.1")
    frr.wait_routes(1000, protocol="bgp")
    rib = frr.show_json("show ip route json")

How the daemons are started (PEERS.md): `/usr/lib/frr/DAEMON -u frr -g frr -i RUN/DAEMON.pid
-z RUN/zserv.api --vty_socket RUN -f RUN/DAEMON.conf -P 0 --log file:RUN/DAEMON.log`, in the
foreground, in the namespace (`ip netns exec`); zebra first, the others once zebra's zserv
socket is there. zebra gets `-M dplane_fpm_nl` with `fpm=True` (its config then needs
`fpm address 127.0.0.1 port 2620`: zebra_config(fpm=True) writes it; zebra is the TCP client,
so the FPM server must listen in the same namespace), and `-r -K SECONDS` with
`graceful_restart=SECONDS` (keep its kernel routes when it stops, and when it starts again treat
the routes it finds there as stale for SECONDS instead of flushing them at once).

Per-daemon config files, not an integrated frr.conf: in 8.4 every daemon parses the whole file
it is given, and would log an error for each line that belongs to another daemon.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from .install import require_tools
from .netns import Netns, Process, _tail, wait_until

FRR_LIB = "/usr/lib/frr"
FPM_PORT = 2620
# Start order; stop is the reverse. zebra must be first: the others connect to its zserv socket.
ORDER = ("zebra", "mgmtd", "staticd", "bgpd", "ospfd", "ospf6d", "isisd", "ripd", "ripngd",
         "pimd", "bfdd", "pbrd", "ldpd")


# -- config builders -------------------------------------------------------------------------


def zebra_config(*, fpm: bool | tuple[str, int] = False, use_nhg: bool = True,
                 extra: str = "") -> str:
    """zebra's config. `fpm=True` points dplane_fpm_nl at 127.0.0.1:2620 (or give (addr,
    port)); `use_nhg=False` adds `no fpm use-next-hop-groups` (routes then carry their
    next hops themselves instead of an RTA_NH_ID to an RTM_NEWNEXTHOP sent before)."""
    lines = ["frr defaults traditional", "!"]
    if fpm:
        addr, port = fpm if isinstance(fpm, tuple) else ("127.0.0.1", FPM_PORT)
        lines.append(f"fpm address {addr} port {port}")
        if not use_nhg:
            lines.append("no fpm use-next-hop-groups")
        lines.append("!")
    if extra:
        lines.append(extra.rstrip())
    return "\n".join(lines) + "\n"


def bgp_config(asn: int, router_id: str, neighbors: Iterable[tuple[str, int]], *,
               graceful_restart: bool = False, connect_timer: int = 1,
               hold: tuple[int, int] | None = None, networks: Iterable[str] = (),
               extra: str = "") -> str:
    """bgpd's config: `router bgp ASN` with `neighbors` as (address, remote AS), each
    activated in the address family of its address (an IPv4 session carries IPv4 unicast, an
    IPv6 session IPv6 unicast).

    Set for tests: `no bgp ebgp-requires-policy` (8.4 otherwise neither accepts nor sends eBGP
    routes without a route-map, RFC 8212), `no bgp default ipv4-unicast` (or an IPv6 session
    would also try IPv4), `no bgp network import-check`, and `timers connect 1` per neighbour
    (the default connect-retry is 120 s). `graceful_restart` adds `bgp graceful-restart` and
    `bgp graceful-restart preserve-fw-state`.
    """
    neighbors = list(neighbors)
    lines = ["frr defaults traditional", "!", f"router bgp {asn}",
             f" bgp router-id {router_id}",
             " no bgp ebgp-requires-policy",
             " no bgp default ipv4-unicast",
             " no bgp network import-check"]
    if graceful_restart:
        lines += [" bgp graceful-restart", " bgp graceful-restart preserve-fw-state"]
    for addr, remote_as in neighbors:
        lines.append(f" neighbor {addr} remote-as {remote_as}")
        lines.append(f" neighbor {addr} timers connect {connect_timer}")
        if hold:
            lines.append(f" neighbor {addr} timers {hold[0]} {hold[1]}")
    nets = [ipaddress.ip_network(n) for n in networks]
    for fam, afi in ((4, "ipv4"), (6, "ipv6")):
        members = [a for a, _ in neighbors if ipaddress.ip_address(a).version == fam]
        fam_nets = [n for n in nets if n.version == fam]
        if not members and not fam_nets:
            continue
        lines.append(f" address-family {afi} unicast")
        lines += [f"  network {n}" for n in fam_nets]
        lines += [f"  neighbor {a} activate" for a in members]
        lines.append(" exit-address-family")
    lines.append("!")
    if extra:
        lines.append(extra.rstrip())
    return "\n".join(lines) + "\n"


def ospf_config(router_id: str, interfaces: Iterable[str], *, area: str = "0.0.0.0",
                redistribute_static: bool = False, hello: int = 1, dead: int = 4,
                extra: str = "") -> str:
    """ospfd's config: the interfaces in `area` as point-to-point links (the broadcast wait
    timer would cost ~40 s, PEERS.md), with fast hello/dead timers."""
    lines = ["frr defaults traditional", "!"]
    for ifname in interfaces:
        lines += [f"interface {ifname}", " ip ospf network point-to-point",
                  f" ip ospf area {area}", f" ip ospf hello-interval {hello}",
                  f" ip ospf dead-interval {dead}", "!"]
    lines += ["router ospf", f" ospf router-id {router_id}",
              # No 5 s minimum between originations of our LSAs, no 1 s arrival limit, SPF at
              # once: a router LSA naming the new neighbour otherwise waits up to 5 s.
              " timers throttle lsa all 0", " timers lsa min-arrival 0",
              " timers throttle spf 0 50 1000"]
    if redistribute_static:
        lines.append(" redistribute static")
    lines.append("!")
    if extra:
        lines.append(extra.rstrip())
    return "\n".join(lines) + "\n"


def ospf6_config(router_id: str, interfaces: Iterable[str], *, area: str = "0.0.0.0",
                 redistribute_static: bool = False, hello: int = 1, dead: int = 4,
                 extra: str = "") -> str:
    """ospf6d's config, as ospf_config for OSPFv3 (needs link-local addresses: the test bed's
    namespaces have DAD off, so they are usable at once)."""
    lines = ["frr defaults traditional", "!"]
    for ifname in interfaces:
        lines += [f"interface {ifname}", f" ipv6 ospf6 area {area}",
                  " ipv6 ospf6 network point-to-point",
                  f" ipv6 ospf6 hello-interval {hello}", f" ipv6 ospf6 dead-interval {dead}",
                  "!"]
    lines += ["router ospf6", f" ospf6 router-id {router_id}",
              " timers lsa min-arrival 0", " timers throttle spf 0 50 1000"]
    if redistribute_static:
        lines.append(" redistribute static")
    lines.append("!")
    if extra:
        lines.append(extra.rstrip())
    return "\n".join(lines) + "\n"


def static_config(routes: Iterable[str | tuple[str, str]]) -> str:
    """staticd's config: each route a prefix (a blackhole route) or (prefix, next hop)."""
    lines = ["frr defaults traditional", "!"]
    for r in routes:
        prefix, via = (r, "blackhole") if isinstance(r, str) else r
        kw = "ipv6" if ipaddress.ip_network(prefix).version == 6 else "ip"
        lines.append(f"{kw} route {prefix} {via}")
    lines.append("!")
    return "\n".join(lines) + "\n"


# -- the instance ----------------------------------------------------------------------------


class Frr:
    """FRR daemons in one namespace. `configs` maps daemon name to config text; zebra is
    always run (with an empty config if none is given)."""

    def __init__(self, ns: Netns, rundir: Path, configs: dict[str, str], *,
                 fpm: bool = False, graceful_restart: int | None = None,
                 zebra_args: Sequence[str] = (), log_level: str = "informational",
                 start_timeout: float = 20.0, fake_kernel_mpls: bool = False) -> None:
        self.ns = ns
        self.rundir = Path(rundir)
        self.configs = dict(configs)
        self.configs.setdefault("zebra", zebra_config(fpm=fpm))
        unknown = set(self.configs) - set(ORDER)
        if unknown:
            raise ValueError(f"unknown FRR daemons {sorted(unknown)}")
        self.daemons = [d for d in ORDER if d in self.configs]
        self.fpm = fpm
        self.graceful_restart = graceful_restart
        self.zebra_args = list(zebra_args)
        self.fake_kernel_mpls = fake_kernel_mpls
        self.log_level = log_level
        self.start_timeout = start_timeout
        self.procs: dict[str, Process] = {}
        self.vtysh_bin = "vtysh"
        self.starts = 0

    def __repr__(self) -> str:
        return f"Frr({self.ns.name}, {self.daemons})"

    # paths

    @property
    def zserv(self) -> Path:
        return self.rundir / "zserv.api"

    def log_path(self, daemon: str) -> Path:
        return self.rundir / f"{daemon}.log"

    def out_path(self, daemon: str) -> Path:
        return self.rundir / f"{daemon}.out"

    def conf_path(self, daemon: str) -> Path:
        return self.rundir / f"{daemon}.conf"

    def vty_path(self, daemon: str) -> Path:
        return self.rundir / f"{daemon}.vty"

    # running

    def argv(self, daemon: str) -> list[str]:
        r = self.rundir
        argv = [f"{FRR_LIB}/{daemon}", "-u", "frr", "-g", "frr",
                "-i", str(r / f"{daemon}.pid"), "-z", str(self.zserv),
                "--vty_socket", str(r), "-f", str(self.conf_path(daemon)), "-P", "0",
                "--log", f"file:{self.log_path(daemon)}", "--log-level", self.log_level]
        if daemon == "zebra":
            argv += ["-s", "16777216"]
            if self.fpm:
                argv += ["-M", "dplane_fpm_nl"]
            if self.graceful_restart is not None:
                argv += ["-r", "-K", str(self.graceful_restart)]
            argv += self.zebra_args
        if daemon == "ldpd":
            # Its control socket in the run directory, not the shared /var/run/frr.
            argv += ["--ctl_socket", str(r)]
        if daemon == "zebra" and self.fake_kernel_mpls:
            argv = ["unshare", "-m", "--propagation", "private", "bash",
                    str(self._fake_mpls_script()), *argv]
        return argv

    def _fake_mpls_script(self) -> Path:
        """A wrapper that runs zebra where /proc/sys/net has an (empty) `mpls` directory: zebra
        8.4's only test for kernel MPLS is stat() of it (docs/mpls.md). Without it zebra
        disables MPLS, and ldpd then signals every pseudowire "not forwarding" (status 0x1):
        the pseudowire never comes up whatever its peer does. The kernel still has no MPLS
        (zebra's label installs fail there); only the signalling is exercised."""
        fake = self.rundir / "fake-proc-sys-net"
        script = self.rundir / "fake-kernel-mpls.sh"
        script.write_text(f"""set -e
F={fake}
mkdir -p $F/mpls
for d in /proc/sys/net/*; do
  b=$(basename $d)
  if [ -d $d ]; then mkdir -p $F/$b; else touch $F/$b; fi
  mount --bind $d $F/$b
done
mount --bind $F /proc/sys/net
exec "$@"
""")
        return script

    def start(self) -> Frr:
        """Writes the configs and starts the daemons, zebra first; returns once every daemon
        answers on its vty socket. Raises RuntimeError (with the logs) if one dies or hangs."""
        tools = require_tools(*(f"{FRR_LIB}/{d}" for d in self.daemons), "vtysh")
        self.vtysh_bin = tools["vtysh"]
        self.rundir.mkdir(parents=True, exist_ok=True)
        shutil.chown(self.rundir, "frr", "frr")
        for d in self.daemons:
            p = self.conf_path(d)
            p.write_text(self.configs[d])
            p.chmod(0o644)
            shutil.chown(p, "frr", "frr")
        self.starts += 1
        for d in self.daemons:
            for stale in (self.vty_path(d), self.rundir / f"{d}.pid"):
                stale.unlink(missing_ok=True)
            if d == "zebra":
                self.zserv.unlink(missing_ok=True)
            with open(self.out_path(d), "a") as f:
                f.write(f"--- start {self.starts}: {' '.join(self.argv(d))}\n")
            self.procs[d] = self.ns.popen(self.argv(d), log=self.out_path(d), name=d)
            self._wait_up(d)
        return self

    def _wait_up(self, daemon: str) -> None:
        proc = self.procs[daemon]
        need = [self.vty_path(daemon)] + ([self.zserv] if daemon == "zebra" else [])
        deadline = time.monotonic() + self.start_timeout
        while not all(p.exists() for p in need):
            if not proc.running:
                raise RuntimeError(f"FRR {daemon} in {self.ns} exited with status "
                                   f"{proc.popen.returncode} at start\n{self.diagnostics()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"FRR {daemon} in {self.ns} did not open "
                                   f"{[str(p) for p in need]} within {self.start_timeout} s\n"
                                   f"{self.diagnostics()}")
            time.sleep(0.02)

    def stop(self, timeout: float = 10.0) -> None:
        """Stops the daemons (SIGTERM, then SIGKILL after `timeout` s), zebra last; with
        `graceful_restart`, zebra first. FRR 8.4's bgpd withdraws every route from zebra when it
        gets SIGTERM, even with `bgp graceful-restart` (and its old `-r` option is gone), and
        zebra then deletes them from the kernel: stopping zebra first (with `-r`) keeps them,
        as a graceful restart needs."""
        order = list(reversed(self.daemons))
        if self.graceful_restart is not None:
            order.remove("zebra")
            order.insert(0, "zebra")
        for d in order:
            p = self.procs.pop(d, None)
            if p is not None:
                p.stop(timeout=timeout)

    def restart(self, *, pause: float = 0.0) -> None:
        """Stops every daemon and starts them again with the same configs (after `pause` s)."""
        self.stop()
        if pause:
            time.sleep(pause)
        self.start()

    @property
    def running(self) -> bool:
        return bool(self.procs) and all(p.running for p in self.procs.values())

    # vtysh

    def vtysh(self, *commands: str, daemon: str | None = None, check: bool = True,
              timeout: float = 30.0) -> str:
        """Runs vtysh commands (each one `-c`) against this instance's vty sockets; with
        `daemon`, only that daemon is asked. Returns stdout."""
        argv = [self.vtysh_bin, "--vty_socket", str(self.rundir)]
        if daemon:
            argv += ["-d", daemon]
        for c in commands:
            argv += ["-c", c]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"vtysh {commands} in {self.ns} failed ({r.returncode}):\n"
                               f"{r.stdout}{r.stderr}")
        return r.stdout

    def show_json(self, command: str, daemon: str | None = None) -> Any:
        """A `show ... json` command's output, parsed ("json" is appended if missing)."""
        if not command.rstrip().endswith("json"):
            command = command.rstrip() + " json"
        if daemon is None:
            daemon = _daemon_for(command)
        out = self.vtysh(command, daemon=daemon)
        return json.loads(out) if out.strip() else {}

    # state

    def bgp_state(self, peer: str) -> str:
        data = self.show_json(f"show bgp neighbors {peer} json", daemon="bgpd")
        return data.get(peer, {}).get("bgpState", "")

    def wait_bgp_established(self, peer: str, timeout: float = 30.0) -> None:
        wait_until(lambda: self.bgp_state(peer) == "Established", timeout,
                   what=f"FRR in {self.ns}: BGP session with {peer} Established",
                   interval=0.2, diagnostics=lambda: self._bgp_diag(peer))

    def _bgp_diag(self, peer: str) -> str:
        out = ""
        try:
            out = self.vtysh(f"show bgp neighbors {peer}", daemon="bgpd", check=False)
        except Exception as e:  # noqa: BLE001 - diagnostics only
            out = repr(e)
        return f"--- show bgp neighbors {peer}\n{out[-3000:]}\n{self.diagnostics()}"

    def ospf_neighbors(self, v6: bool = False) -> list[dict]:
        """OSPF neighbours as a list of dicts, each with at least "neighborId" and "state"
        ("Full", "Init", ...: the role after a slash, as in "Full/DR", is dropped)."""
        if v6:
            data = self.show_json("show ipv6 ospf6 neighbor json", daemon="ospf6d")
            out = []
            for n in data.get("neighbors", []):
                out.append(dict(n, state=str(n.get("state", "")).split("/")[0]))
            return out
        data = self.show_json("show ip ospf neighbor json", daemon="ospfd")
        out = []
        for rid, entries in data.get("neighbors", {}).items():
            for n in entries if isinstance(entries, list) else [entries]:
                state = n.get("nbrState") or n.get("state") or ""
                out.append(dict(n, neighborId=rid, state=str(state).split("/")[0]))
        return out

    def wait_ospf_full(self, count: int = 1, *, v6: bool = False,
                       neighbor: str | None = None, timeout: float = 30.0) -> list[dict]:
        """Waits until `count` OSPF (or OSPFv3 with v6=True) neighbours are Full (or the one
        with router id `neighbor`), and returns the neighbour list."""
        def probe() -> list[dict] | None:
            ns = self.ospf_neighbors(v6)
            full = [n for n in ns if n["state"] == "Full"
                    and (neighbor is None or n["neighborId"] == neighbor)]
            return ns if len(full) >= (1 if neighbor else count) else None

        return wait_until(probe, timeout, interval=0.2,
                          what=f"FRR in {self.ns}: {count} OSPF{'v3' if v6 else ''} "
                               "neighbour(s) Full",
                          diagnostics=self.diagnostics)

    def route_summary(self, family: int = 4, vrf: str = "default") -> dict[str, dict]:
        """zebra's `show ip route [vrf X] summary json`, as {protocol: {"rib": n, "fib": n}}."""
        afi = "ip" if family == 4 else "ipv6"
        vrf_part = "" if vrf == "default" else f" vrf {vrf}"
        data = self.show_json(f"show {afi} route{vrf_part} summary json", daemon="zebra")
        out: dict[str, dict] = {}
        for r in data.get("routes", []):
            e = out.setdefault(r.get("type", "?"), {"rib": 0, "fib": 0})
            e["rib"] += int(r.get("rib", 0))
            e["fib"] += int(r.get("fib", 0))
        return out

    def route_count(self, family: int = 4, *, protocol: str | None = "bgp",
                    vrf: str = "default", fib: bool = False) -> int:
        s = self.route_summary(family, vrf)
        key = "fib" if fib else "rib"
        if protocol is None:
            return sum(v[key] for v in s.values())
        # The summary splits BGP into "ebgp" and "ibgp".
        names = ("ebgp", "ibgp") if protocol == "bgp" else (protocol,)
        return sum(s.get(n, {}).get(key, 0) for n in names)

    def wait_routes(self, count: int, vrf: str = "default", *, family: int = 4,
                    protocol: str | None = "bgp", fib: bool = True, exact: bool = True,
                    timeout: float = 30.0) -> int:
        """Waits until zebra holds `count` routes of `protocol` (None: all) for `family` in
        `vrf` (exactly, or at least with exact=False); `fib=True` counts the ones installed in
        the kernel. Returns the count."""
        last = [-1]

        def probe() -> bool:
            last[0] = self.route_count(family, protocol=protocol, vrf=vrf, fib=fib)
            return last[0] == count if exact else last[0] >= count

        wait_until(probe, timeout, interval=0.2,
                   what=f"FRR in {self.ns}: {count} IPv{family} {protocol or 'any'} routes "
                        f"({'fib' if fib else 'rib'}) in vrf {vrf}",
                   diagnostics=lambda: f"last count {last[0]}\n{self.diagnostics()}")
        return last[0]

    def rib_prefixes(self, family: int = 4, *, protocol: str | None = "bgp",
                     vrf: str = "default", selected: bool = True) -> set[str]:
        """The prefixes in zebra's RIB (`show ip route json`) of `protocol`; with `selected`,
        only selected routes."""
        afi = "ip" if family == 4 else "ipv6"
        vrf_part = "" if vrf == "default" else f" vrf {vrf}"
        proto_part = f" {protocol}" if protocol else ""
        data = self.show_json(f"show {afi} route{vrf_part}{proto_part} json", daemon="zebra")
        out = set()
        for prefix, entries in data.items():
            if not selected or any(e.get("selected") for e in entries):
                out.add(prefix)
        return out

    def bgp_prefixes(self, family: int = 4) -> set[str]:
        """The prefixes in bgpd's table for the family (`show bgp ipv4 unicast json`)."""
        afi = "ipv4" if family == 4 else "ipv6"
        data = self.show_json(f"show bgp {afi} unicast json", daemon="bgpd")
        return set(data.get("routes", {}))

    # diagnostics

    def diagnostics(self, limit: int = 4000) -> str:
        parts = [f"=== FRR in {self.ns} ({self.rundir})"]
        for d in self.daemons:
            proc = self.procs.get(d)
            state = "running" if proc and proc.running else (
                f"exited {proc.popen.returncode}" if proc else "stopped")
            parts.append(f"--- {d} ({state}) log:\n{_tail(self.log_path(d), limit)}")
            out = _tail(self.out_path(d), limit)
            if out.strip():
                parts.append(f"--- {d} stdout/stderr:\n{out}")
        return "\n".join(parts)


def _daemon_for(command: str) -> str | None:
    c = command.split()
    if len(c) >= 2 and c[0] == "show":
        if c[1] == "bgp" or (c[1] in ("ip", "ipv6") and len(c) > 2 and c[2] == "bgp"):
            return "bgpd"
        if c[1] == "ip" and len(c) > 2 and c[2] == "ospf":
            return "ospfd"
        if c[1] == "ipv6" and len(c) > 2 and c[2] == "ospf6":
            return "ospf6d"
        if c[1] in ("ip", "ipv6") and len(c) > 2 and c[2] in ("route", "nht"):
            return "zebra"
        if c[1] in ("fpm", "interface", "zebra", "nexthop-group"):
            return "zebra"
    return None


def frr_available() -> bool:
    return all(os.access(f"{FRR_LIB}/{d}", os.X_OK) for d in ("zebra", "bgpd"))
