"""A BIRD 2 instance per namespace, mostly as a fast route injector (PEERS.md: 500,000 IPv4
routes as `protocol static` blackholes exported over BGP reached FRR in ~12 s).

    cfg = BirdConfig("192.0.2.1", local_as=65001,
                     sessions=[BgpSession("192.0.2.1", "192.0.2.2", 65002),
                               BgpSession("2001:db8::1", "2001:db8::2", 65002)],
                     routes4=prefixes("198.18.0.0/15", 1000, 26),
                     routes6=prefixes("2001:db8:1000::/36", 1000, 48))
    bird = tb.bird(a, cfg)
    bird.wait_established()            # every BGP session
    bird.set_routes(routes4=cfg.routes4[100:])   # withdraw the first 100 (birdc configure)

The daemon: `bird -f -c RUN/bird.conf -s RUN/bird.ctl -P RUN/bird.pid` in the namespace, in the
foreground, logging to RUN/bird.log. There is no `protocol kernel`, so BIRD never touches its
namespace's routing table: it only announces.
"""

from __future__ import annotations

import ipaddress
import itertools
import re
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable

from .install import require_tools
from .netns import Netns, Process, _tail, wait_until


def prefixes(base: str, count: int, plen: int) -> list[str]:
    """The first `count` subnets of length `plen` of `base`, as strings: prefixes("198.18.0.0/15",
    1000, 26) gives 198.18.0.0/26, 198.18.0.64/26, ... Raises ValueError if `base` is too small.

    Good bases: 198.18.0.0/15 (benchmarking, RFC 2544: 512 /24s, 131,072 /32s), 2001:db8::/32
    (documentation); for hundreds of thousands of IPv4 /24s only a namespace-private range such
    as 100.64.0.0/10 is large enough (16,384 /24s) or use /32s."""
    net = ipaddress.ip_network(base)
    if plen < net.prefixlen or plen > net.max_prefixlen:
        raise ValueError(f"/{plen} does not fit in {net}")
    available = 1 << (plen - net.prefixlen)
    if count > available:
        raise ValueError(f"{net} holds only {available} /{plen} prefixes, not {count}")
    return [str(n) for n in itertools.islice(net.subnets(new_prefix=plen), count)]


@dataclass
class BgpSession:
    """One BGP session of BIRD: from `local` (our address) to `neighbor` in AS `neighbor_as`.
    The family of the addresses picks the channel (ipv4 or ipv6)."""

    local: str
    neighbor: str
    neighbor_as: int
    name: str = ""
    import_filter: str = "all"
    export_filter: str = "where source = RTS_STATIC"

    @property
    def family(self) -> int:
        return ipaddress.ip_address(self.neighbor).version


@dataclass
class BirdConfig:
    """A BIRD 2 config: static blackhole routes (routes4, routes6) exported over eBGP/iBGP
    sessions. `graceful_restart` turns on `graceful restart on;` in every session. The timers
    are shortened for tests: BIRD would otherwise wait 5 s before its first connect
    (`connect delay time`) and 60 s after a session error (`error wait time`)."""

    router_id: str
    local_as: int
    sessions: list[BgpSession] = field(default_factory=list)
    routes4: list[str] = field(default_factory=list)
    routes6: list[str] = field(default_factory=list)
    graceful_restart: bool = False
    hold_time: int = 9
    extra: str = ""

    def render(self, log_path: Path | None = None) -> str:
        out = []
        if log_path is not None:
            out.append(f'log "{log_path}" all;')
        out += [f"router id {self.router_id};", "",
                "protocol device {", "  scan time 10;", "}", ""]
        for fam, routes in ((4, self.routes4), (6, self.routes6)):
            out.append(f"protocol static static{fam} {{")
            out.append(f"  ipv{fam};")
            out += [f"  route {r} blackhole;" for r in routes]
            out += ["}", ""]
        names = set()
        for i, s in enumerate(self.sessions):
            name = s.name or f"bgp{s.family}_{i}"
            if name in names:
                raise ValueError(f"two BIRD sessions named {name}")
            names.add(name)
            out += [f"protocol bgp {name} {{",
                    f"  local {s.local} as {self.local_as};",
                    f"  neighbor {s.neighbor} as {s.neighbor_as};",
                    f"  hold time {self.hold_time};",
                    "  connect delay time 1;",
                    "  connect retry time 2;",
                    "  error wait time 1, 5;",
                    f"  graceful restart {'on' if self.graceful_restart else 'off'};",
                    f"  ipv{s.family} {{",
                    f"    import {s.import_filter};",
                    f"    export {s.export_filter};",
                    "  };",
                    "}", ""]
        if self.extra:
            out.append(self.extra.rstrip())
        return "\n".join(out) + "\n"

    def session_names(self) -> list[str]:
        return [s.name or f"bgp{s.family}_{i}" for i, s in enumerate(self.sessions)]


class Bird:
    """BIRD 2 in a namespace. `config` is a BirdConfig (then `set_routes` works) or the text
    of a config."""

    def __init__(self, ns: Netns, rundir: Path, config: BirdConfig | str, *,
                 start_timeout: float = 15.0) -> None:
        self.ns = ns
        self.rundir = Path(rundir)
        self.config = config
        self.start_timeout = start_timeout
        self.proc: Process | None = None
        self.bird_bin = "bird"
        self.birdc_bin = "birdc"

    def __repr__(self) -> str:
        return f"Bird({self.ns.name})"

    @property
    def conf_path(self) -> Path:
        return self.rundir / "bird.conf"

    @property
    def ctl(self) -> Path:
        return self.rundir / "bird.ctl"

    @property
    def log_path(self) -> Path:
        return self.rundir / "bird.log"

    @property
    def out_path(self) -> Path:
        return self.rundir / "bird.out"

    def _write_config(self) -> None:
        text = (self.config.render(self.log_path) if isinstance(self.config, BirdConfig)
                else self.config)
        self.conf_path.write_text(text)

    def start(self) -> Bird:
        tools = require_tools("bird", "birdc")
        self.bird_bin, self.birdc_bin = tools["bird"], tools["birdc"]
        self.rundir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        check = subprocess.run([self.bird_bin, "-p", "-c", str(self.conf_path)],
                               capture_output=True, text=True, timeout=60)
        if check.returncode != 0:
            raise RuntimeError(f"BIRD rejected {self.conf_path}:\n{check.stdout}{check.stderr}")
        self.ctl.unlink(missing_ok=True)
        self.proc = self.ns.popen(
            [self.bird_bin, "-f", "-c", str(self.conf_path), "-s", str(self.ctl),
             "-P", str(self.rundir / "bird.pid")],
            log=self.out_path, name="bird")
        wait_until(self._answers, self.start_timeout, interval=0.05,
                   what=f"BIRD in {self.ns} answering on {self.ctl}",
                   diagnostics=self.diagnostics)
        return self

    def _answers(self) -> bool:
        if self.proc is not None and not self.proc.running:
            raise RuntimeError(f"BIRD in {self.ns} exited at start\n{self.diagnostics()}")
        if not self.ctl.exists():
            return False
        return self.birdc("show status", check=False).find("Daemon is up") >= 0

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.running

    def birdc(self, command: str, *, check: bool = True, timeout: float = 30.0) -> str:
        """Runs one birdc command on the control socket and returns its output."""
        r = subprocess.run([self.birdc_bin, "-s", str(self.ctl), *command.split()],
                           capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"birdc {command!r} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        return r.stdout

    def configure(self, config: BirdConfig | str | None = None) -> str:
        """Writes `config` (or the current one again) and makes BIRD reload it
        (`birdc configure`): static routes that are gone are withdrawn, new ones announced."""
        if config is not None:
            self.config = config
        self._write_config()
        out = self.birdc(f'configure "{self.conf_path}"')
        if "Reconfigured" not in out and "Reconfiguration in progress" not in out:
            raise RuntimeError(f"BIRD in {self.ns} did not reconfigure:\n{out}")
        return out

    def set_routes(self, routes4: Iterable[str] | None = None,
                   routes6: Iterable[str] | None = None) -> str:
        """Replaces the static routes (None: keep that family's) and reconfigures."""
        if not isinstance(self.config, BirdConfig):
            raise TypeError("set_routes needs a BirdConfig, not config text")
        cfg = self.config
        new = replace(cfg,
                      routes4=list(routes4) if routes4 is not None else cfg.routes4,
                      routes6=list(routes6) if routes6 is not None else cfg.routes6)
        return self.configure(new)

    def protocol_state(self, name: str) -> str:
        """The BGP state of protocol `name` ("Established", "Active", "Connect", ...)."""
        out = self.birdc(f"show protocols all {name}", check=False)
        m = re.search(r"BGP state:\s+(\S+)", out)
        return m.group(1) if m else ""

    def exported(self, name: str) -> int:
        """How many routes protocol `name` exports (from `show protocols all`)."""
        out = self.birdc(f"show protocols all {name}", check=False)
        m = re.search(r"Routes:\s+\d+ imported,(?: \d+ filtered,)? (\d+) exported", out)
        return int(m.group(1)) if m else -1

    def wait_established(self, *names: str, timeout: float = 30.0) -> None:
        """Waits until the named BGP protocols (default: every session of the BirdConfig) are
        Established."""
        if not names:
            if not isinstance(self.config, BirdConfig):
                raise TypeError("name the protocols when the config is text")
            names = tuple(self.config.session_names())
        wait_until(lambda: all(self.protocol_state(n) == "Established" for n in names),
                   timeout, interval=0.2,
                   what=f"BIRD in {self.ns}: {', '.join(names)} Established",
                   diagnostics=lambda: self.birdc("show protocols", check=False)
                   + self.diagnostics())

    def diagnostics(self, limit: int = 4000) -> str:
        state = "running" if self.running else "stopped"
        return (f"=== BIRD in {self.ns} ({state}, {self.rundir})\n--- bird.log:\n"
                f"{_tail(self.log_path, limit)}\n--- bird stdout/stderr:\n"
                f"{_tail(self.out_path, limit)}")
