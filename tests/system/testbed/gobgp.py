"""GoBGP 3.x (Debian's gobgpd) in a namespace: the VPN route speaker beside Linerate (its gRPC
API on 127.0.0.1 of that namespace) or a remote PE.

    gb = tb.gobgp(ns, gobgp_config(65000, "10.0.12.1", [("10.0.12.2", 65000)],
                                   families=("l3vpn-ipv4-unicast",)), api_port=50051)
    gb.wait_established("10.0.12.2")
    gb.cli("global", "rib", "-a", "vpnv4")

gobgpd runs in the foreground with `--api-hosts 127.0.0.1:PORT -p --pprof-disable` (PEERS.md);
its log goes to the run directory. `cli` runs the `gobgp` client against that API.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Iterable

from .install import require_tools
from .netns import Netns, Process, _tail, wait_until


def gobgp_config(asn: int, router_id: str, neighbors: Iterable[tuple[str, int]], *,
                 families: Iterable[str] = ("l3vpn-ipv4-unicast",), port: int = 179) -> str:
    """gobgpd's TOML: the global AS and router id, and each (address, AS) neighbour with
    `families` (GoBGP's afi-safi names) and a 1 s connect retry."""
    lines = ["[global.config]", f"  as = {asn}", f'  router-id = "{router_id}"',
             f"  port = {port}", ""]
    for addr, remote_as in neighbors:
        lines += ["[[neighbors]]", "  [neighbors.config]",
                  f'    neighbor-address = "{addr}"', f"    peer-as = {remote_as}",
                  "  [neighbors.timers.config]", "    connect-retry = 1"]
        for f in families:
            lines += ["  [[neighbors.afi-safis]]", "    [neighbors.afi-safis.config]",
                      f'      afi-safi-name = "{f}"']
        lines.append("")
    return "\n".join(lines) + "\n"


class Gobgp:
    def __init__(self, ns: Netns, rundir: Path, config: str, *, api_port: int = 50051,
                 start_timeout: float = 15.0) -> None:
        self.ns = ns
        self.rundir = Path(rundir)
        self.config = config
        self.api_port = api_port
        self.start_timeout = start_timeout
        self.proc: Process | None = None
        self.gobgpd_bin = "gobgpd"
        self.gobgp_bin = "gobgp"

    def __repr__(self) -> str:
        return f"Gobgp({self.ns.name}, api {self.api_port})"

    @property
    def conf_path(self) -> Path:
        return self.rundir / "gobgpd.toml"

    @property
    def log_path(self) -> Path:
        return self.rundir / "gobgpd.log"

    def start(self) -> Gobgp:
        tools = require_tools("gobgpd", "gobgp")
        self.gobgpd_bin, self.gobgp_bin = tools["gobgpd"], tools["gobgp"]
        self.rundir.mkdir(parents=True, exist_ok=True)
        self.conf_path.write_text(self.config)
        self.proc = self.ns.popen(
            [self.gobgpd_bin, "-f", str(self.conf_path), "--api-hosts",
             f"127.0.0.1:{self.api_port}", "-p", "--pprof-disable"],
            log=self.log_path, name="gobgpd")
        wait_until(self._answers, self.start_timeout, interval=0.1,
                   what=f"gobgpd in {self.ns} answering on its API",
                   diagnostics=self.diagnostics)
        return self

    def _answers(self) -> bool:
        if self.proc is not None and not self.proc.running:
            raise RuntimeError(f"gobgpd in {self.ns} exited at start\n{self.diagnostics()}")
        return self.cli("global", check=False).find("AS:") >= 0

    def cli(self, *args: str, check: bool = True, timeout: float = 30.0) -> str:
        """Runs `gobgp ARGS` against this instance's API (in its namespace)."""
        r = subprocess.run(self.ns.exec_argv([self.gobgp_bin, "-p", str(self.api_port), *args]),
                           capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"gobgp {' '.join(args)} failed ({r.returncode}):\n"
                               f"{r.stdout}{r.stderr}")
        return r.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.cli(*args, "-j") or "null")

    def neighbor_state(self, addr: str) -> str:
        try:
            n = self.json("neighbor", addr)
        except (RuntimeError, json.JSONDecodeError):
            return "unknown"
        return str(n.get("state", {}).get("session_state", "unknown"))

    def wait_established(self, addr: str, timeout: float = 30.0) -> None:
        wait_until(lambda: self.neighbor_state(addr) in ("established", "6"), timeout,
                   what=f"GoBGP session with {addr} established",
                   diagnostics=self.diagnostics)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.running

    def diagnostics(self) -> str:
        return f"--- {self.log_path}\n{_tail(self.log_path)}"
