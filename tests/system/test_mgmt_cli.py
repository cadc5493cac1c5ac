"""The management plane as a network engineer uses it: `linerate daemon` serves the runtime API
on a Unix socket (and, opt-in, on TCP with a token), and every `linerate show / config / route /
port / worker / clear` command is a client of it.

Each test starts the real binary (`linerate daemon --config CFG --state DIR --socket SOCK`) in
its own temporary folder, waits until the socket answers, and always stops it (SIGTERM, then
SIGKILL) afterwards. The read-only `show` tests share one module-scoped router, since nothing
they do changes it; every test that changes something has a router of its own.

Ports are `mem` ports, which need no traffic source, so counters stay at zero: these tests are
about what the router says and what the commands change, not about forwarding.

The assertions compare what the router reports with the config it was given (names, addresses,
VRFs, MACs, next hops, route origins, counts), and what a command changed with what it should
have changed (and, for a refused command, that nothing changed).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import signal
import socket
import stat
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rsyslog import Rsyslog, parse_structured_data, rsyslog_server

# --------------------------------------------------------------------------------------------
# The network under test
# --------------------------------------------------------------------------------------------

# Four mem ports; p0 carries an untagged interface and a VLAN 100 sub-interface; p3 is in VRF
# `blue`. 10.0.0.0/8 exists in both VRFs with different next hops; the default route is ECMP over
# two neighbours (one of them behind the sub-interface). Route limits are set so `show system`
# and the metrics can be checked against the config.
CONFIG = """\
router: { workers: 1 }
limits: { ipv4-routes: 100000, ipv6-routes: 50000 }
vrfs: [blue]
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
  - { name: p2, driver: mem }
  - { name: p3, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24], ipv6: ["2001:db8:1::1/64"] }
  - { name: p0.100, port: p0, vlan: 100, mac: "02:00:00:00:00:01", ipv4: [198.51.100.1/24], ipv6: ["2001:db8:100::1/64"] }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [203.0.113.1/24], ipv6: ["2001:db8:2::1/64"] }
  - { name: p2, port: p2, mac: "02:00:00:00:02:01", ipv4: [198.18.2.1/24] }
  - { name: p3, port: p3, vrf: blue, mac: "02:00:00:00:03:01", ipv4: [100.64.0.1/24], ipv6: ["2001:db8:3::1/64"] }
neighbors:
  - { interface: p0, ip: 192.0.2.2, mac: "02:00:00:00:00:02" }
  - { interface: p0, ip: "2001:db8:1::2", mac: "02:00:00:00:00:02" }
  - { interface: p0.100, ip: 198.51.100.2, mac: "02:00:00:00:10:02" }
  - { interface: p1, ip: 203.0.113.2, mac: "02:00:00:00:01:02" }
  - { interface: p1, ip: "2001:db8:2::2", mac: "02:00:00:00:01:02" }
  - { interface: p2, ip: 198.18.2.2, mac: "02:00:00:00:02:02" }
  - { interface: p3, ip: 100.64.0.2, mac: "02:00:00:00:03:02" }
routes:
  - { prefix: 10.0.0.0/8, via: 192.0.2.2 }
  - { prefix: 10.1.0.0/16, via: 203.0.113.2 }
  - { prefix: 0.0.0.0/0, via: [192.0.2.2, 198.51.100.2] }
  - { prefix: 203.0.113.128/25, blackhole: true }
  - { prefix: "2001:db8:ff00::/40", via: "2001:db8:2::2" }
  - { prefix: 10.0.0.0/8, vrf: blue, via: 100.64.0.2 }
"""

PORTS = ["p0", "p1", "p2", "p3"]

# name -> (port, vlan, vrf, mac, ipv4, ipv6)
INTERFACES = {
    "p0": ("p0", None, "default", "02:00:00:00:00:01", ["192.0.2.1/24"], ["2001:db8:1::1/64"]),
    "p0.100": ("p0", 100, "default", "02:00:00:00:00:01", ["198.51.100.1/24"],
               ["2001:db8:100::1/64"]),
    "p1": ("p1", None, "default", "02:00:00:00:01:01", ["203.0.113.1/24"], ["2001:db8:2::1/64"]),
    "p2": ("p2", None, "default", "02:00:00:00:02:01", ["198.18.2.1/24"], []),
    "p3": ("p3", None, "blue", "02:00:00:00:03:01", ["100.64.0.1/24"], ["2001:db8:3::1/64"]),
}

# (interface, ip, mac)
NEIGHBORS = {
    ("p0", "192.0.2.2", "02:00:00:00:00:02"),
    ("p0", "2001:db8:1::2", "02:00:00:00:00:02"),
    ("p0.100", "198.51.100.2", "02:00:00:00:10:02"),
    ("p1", "203.0.113.2", "02:00:00:00:01:02"),
    ("p1", "2001:db8:2::2", "02:00:00:00:01:02"),
    ("p2", "198.18.2.2", "02:00:00:00:02:02"),
    ("p3", "100.64.0.2", "02:00:00:00:03:02"),
}

# The FIBs the config must produce: prefix -> (origin, kind, sorted via). Connected subnets
# (`connected`), the router's own addresses (`local`), a host route per neighbour (`neighbor`),
# and the static routes.
ROUTES_V4 = {
    "0.0.0.0/0": ("static", "ecmp", ["192.0.2.2 on p0", "198.51.100.2 on p0.100"]),
    "10.0.0.0/8": ("static", "forward", ["192.0.2.2 on p0"]),
    "10.1.0.0/16": ("static", "forward", ["203.0.113.2 on p1"]),
    "192.0.2.0/24": ("connected", "connected", ["p0"]),
    "192.0.2.1/32": ("connected", "local", []),
    "192.0.2.2/32": ("neighbor", "forward", ["192.0.2.2 on p0"]),
    "198.18.2.0/24": ("connected", "connected", ["p2"]),
    "198.18.2.1/32": ("connected", "local", []),
    "198.18.2.2/32": ("neighbor", "forward", ["198.18.2.2 on p2"]),
    "198.51.100.0/24": ("connected", "connected", ["p0.100"]),
    "198.51.100.1/32": ("connected", "local", []),
    "198.51.100.2/32": ("neighbor", "forward", ["198.51.100.2 on p0.100"]),
    "203.0.113.0/24": ("connected", "connected", ["p1"]),
    "203.0.113.1/32": ("connected", "local", []),
    "203.0.113.2/32": ("neighbor", "forward", ["203.0.113.2 on p1"]),
    "203.0.113.128/25": ("static", "blackhole", []),
}
ROUTES_V6 = {
    "2001:db8:1::/64": ("connected", "connected", ["p0"]),
    "2001:db8:1::1/128": ("connected", "local", []),
    "2001:db8:1::2/128": ("neighbor", "forward", ["2001:db8:1::2 on p0"]),
    "2001:db8:2::/64": ("connected", "connected", ["p1"]),
    "2001:db8:2::1/128": ("connected", "local", []),
    "2001:db8:2::2/128": ("neighbor", "forward", ["2001:db8:2::2 on p1"]),
    "2001:db8:100::/64": ("connected", "connected", ["p0.100"]),
    "2001:db8:100::1/128": ("connected", "local", []),
    "2001:db8:ff00::/40": ("static", "forward", ["2001:db8:2::2 on p1"]),
}
ROUTES_V4_BLUE = {
    "10.0.0.0/8": ("static", "forward", ["100.64.0.2 on p3"]),
    "100.64.0.0/24": ("connected", "connected", ["p3"]),
    "100.64.0.1/32": ("connected", "local", []),
    "100.64.0.2/32": ("neighbor", "forward", ["100.64.0.2 on p3"]),
}
ROUTES_V6_BLUE = {
    "2001:db8:3::/64": ("connected", "connected", ["p3"]),
    "2001:db8:3::1/128": ("connected", "local", []),
}

# A new config: 10.1.0.0/16 becomes 10.2.0.0/16, and p2 moves to 198.18.3.1/24 (and its
# neighbour with it).
NEW_CONFIG = (
    CONFIG.replace("10.1.0.0/16, via: 203.0.113.2", "10.2.0.0/16, via: 203.0.113.2")
    .replace("198.18.2.1/24", "198.18.3.1/24")
    .replace("ip: 198.18.2.2", "ip: 198.18.3.2")
)
# Another one: 10.0.0.0/8 in the default VRF moves to p1.
NEW_CONFIG_2 = CONFIG.replace(
    "{ prefix: 10.0.0.0/8, via: 192.0.2.2 }", "{ prefix: 10.0.0.0/8, via: 203.0.113.2 }"
)
# The original, with 172.16.0.0/12 configured as a static route.
WITH_STATIC_172 = CONFIG.replace(
    "routes:\n", "routes:\n  - { prefix: 172.16.0.0/12, via: 203.0.113.2 }\n"
)
# The original, without the neighbour on p2 (only API routes use it).
# Without p2's neighbour, and with p2 renumbered: 198.18.2.2 is then neither a neighbour nor on
# a connected subnet (a next hop on a connected subnet would be resolved by ARP instead).
WITHOUT_P2_NEIGHBOR = CONFIG.replace(
    '  - { interface: p2, ip: 198.18.2.2, mac: "02:00:00:00:02:02" }\n', ""
).replace("ipv4: [198.18.2.1/24]", "ipv4: [198.18.3.1/24]")

for _variant in (NEW_CONFIG, NEW_CONFIG_2, WITH_STATIC_172, WITHOUT_P2_NEIGHBOR):
    assert _variant != CONFIG  # each replacement above must have matched


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------

def free_tcp_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def line_col(text: str, line_contains: str, value: str) -> tuple[int, int]:
    """1-based line and column of `value` on the first line of `text` holding `line_contains`."""
    for i, line in enumerate(text.splitlines(), 1):
        if line_contains in line:
            return i, line.index(value) + 1
    raise AssertionError(f"no line with {line_contains!r}")


def by_prefix(routes_view: dict) -> dict[str, tuple[str, str, list[str]]]:
    """`show ip route --json` as prefix -> (origin, kind, sorted via)."""
    return {r["prefix"]: (r["origin"], r["kind"], sorted(r["via"])) for r in routes_view["routes"]}


def net_key(prefix: str) -> tuple[int, int]:
    n = ipaddress.ip_network(prefix)
    return int(n.network_address), n.prefixlen


def metric_families(text: str) -> dict[str, Any]:
    """The exposition parsed by the Prometheus client library, by family name."""
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(fam: Any, name: str | None = None) -> dict[tuple, float]:
    """A family's samples as {sorted label items: value} (only those named `name`, if given)."""
    return {
        tuple(sorted(s.labels.items())): s.value
        for s in fam.samples
        if name is None or s.name == name
    }


def wait_until(pred: Callable[[], Any], timeout: float, what: str, step: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)


class Daemon:
    """One `linerate daemon` and a CLI bound to its socket.

    `start()` waits until `linerate show system` answers; `stop()` sends SIGTERM, then SIGKILL
    after 5 s. `cli(*args)` runs `linerate ARGS --socket SOCK` and returns the CompletedProcess;
    `json(*args)` adds `--json`, requires success and parses stdout; `ok(*args)` requires
    success and returns stdout; `fails(*args)` requires failure and returns the process.
    """

    def __init__(
        self,
        binary: Path,
        workdir: Path,
        config: Path,
        *,
        state: Path | None = None,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.bin = Path(binary)
        self.dir = Path(workdir)
        self.config = Path(config)
        self.state = state if state is not None else self.dir / "state"
        self.socket = self.dir / "api.sock"
        self.extra = tuple(extra)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.stderr_path = self.dir / "daemon.stderr"
        self.returncode: int | None = None

    def command(self) -> list[str]:
        return [
            str(self.bin), "daemon", "--config", str(self.config), "--state", str(self.state),
            "--socket", str(self.socket), *self.extra,
        ]

    def start(self, timeout: float = 20.0) -> Daemon:
        assert self.proc is None, "already running"
        self.starts += 1
        self.stderr_path = self.dir / f"daemon-{self.starts}.stderr"
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                cwd=self.dir,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                self.proc = None
                raise AssertionError(f"linerate daemon exited with {rc}:\n{self.stderr()}")
            if self.socket.exists() and self.cli("show", "system", timeout=5).returncode == 0:
                return self
            if time.monotonic() >= deadline:
                self.stop()
                raise AssertionError(f"the API did not answer in {timeout} s:\n{self.stderr()}")
            time.sleep(0.05)

    def stop(self) -> int | None:
        """Stops the daemon (SIGTERM, then SIGKILL); returns its exit status."""
        proc, self.proc = self.proc, None
        if proc is None:
            return self.returncode
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self.returncode = proc.returncode
        return self.returncode

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def cli(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.bin), *args, "--socket", str(self.socket)],
            capture_output=True, text=True, timeout=timeout, cwd=self.dir,
        )

    def ok(self, *args: str) -> str:
        r = self.cli(*args)
        assert r.returncode == 0, f"`linerate {' '.join(args)}` failed ({r.returncode}):\n{r.stderr}"
        return r.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))

    def fails(self, *args: str) -> subprocess.CompletedProcess:
        r = self.cli(*args)
        assert r.returncode != 0, (
            f"`linerate {' '.join(args)}` should have failed:\n{r.stdout}{r.stderr}"
        )
        assert r.stderr.strip(), "a refused command must say why"
        return r

    # Shortcuts for what the tests look at most.
    def running(self) -> str:
        return self.ok("show", "running-config")

    def routes(self, *args: str, family: str = "ip") -> dict:
        return self.json("show", family, "route", *args)

    def history(self) -> list[dict]:
        return self.json("config", "history")


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture
def start_daemon(linerate_bin: Path, tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Starts daemons in the test's folder (`config` is YAML text or a path); stops them all."""
    started: list[Daemon] = []

    def start(
        config: str | Path = CONFIG, *, name: str = "r1", extra: tuple[str, ...] = (),
        state: Path | None = None,
    ) -> Daemon:
        d = tmp_path / name
        d.mkdir(exist_ok=True)
        cfg = config if isinstance(config, Path) else write(d / "router.yaml", config)
        daemon = Daemon(linerate_bin, d, cfg, state=state, extra=extra)
        started.append(daemon)
        return daemon.start()

    yield start
    for daemon in started:
        daemon.stop()


@pytest.fixture(scope="module")
def router(linerate_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """One router for the read-only `show` tests, started from CONFIG."""
    d = tmp_path_factory.mktemp("shared-router")
    daemon = Daemon(linerate_bin, d, write(d / "router.yaml", CONFIG))
    daemon.start()
    try:
        yield daemon
    finally:
        daemon.stop()


# --------------------------------------------------------------------------------------------
# 1. Looking: show ... (read-only, one shared router)
# --------------------------------------------------------------------------------------------

def test_show_interfaces_match_the_config(router: Daemon) -> None:
    """Every configured interface is listed with its port, VLAN, VRF, MAC, MTU and addresses,
    and is up/up (mem ports are in service from the start)."""
    ifs = router.json("show", "interfaces")
    assert [i["name"] for i in ifs] == list(INTERFACES)
    for i in ifs:
        port, vlan, vrf, mac, v4, v6 = INTERFACES[i["name"]]
        assert (i["port"], i["vlan"], i["vrf"], i["mac"]) == (port, vlan, vrf, mac), i
        assert (i["ipv4"], i["ipv6"]) == (v4, v6), i
        assert i["mtu"] == 1500
        assert i["admin_up"] is True and i["oper_up"] is True, i


def test_show_interfaces_human_output(router: Daemon) -> None:
    """The table has a header and one row per interface, addresses in one list."""
    lines = router.ok("show", "interfaces").splitlines()
    assert lines[0].split() == [
        "Interface", "Port", "VLAN", "Admin/Oper", "VRF", "MTU", "MAC", "Addresses",
    ]
    rows = {ln.split()[0]: ln.split() for ln in lines[1:]}
    assert set(rows) == set(INTERFACES)
    assert rows["p0.100"] == [
        "p0.100", "p0", "100", "up/up", "default", "1500", "02:00:00:00:00:01",
        "198.51.100.1/24,", "2001:db8:100::1/64",
    ]
    assert rows["p3"][:5] == ["p3", "p3", "-", "up/up", "blue"]
    # An interface with IPv4 only lists just that address (no placeholder for IPv6; this used
    # to print `198.18.2.1/24 -`).
    assert rows["p2"] == [
        "p2", "p2", "-", "up/up", "default", "1500", "02:00:00:00:02:01", "198.18.2.1/24",
    ]


def test_show_ports(router: Daemon) -> None:
    """Each port: its index, the mem driver, in service, one receive queue polled by worker 0,
    and no frames (nothing sends on mem ports here)."""
    ports = router.json("show", "ports")
    assert [p["name"] for p in ports] == PORTS
    for i, p in enumerate(ports):
        assert p["index"] == i
        assert p["driver"] == "mem"
        assert p["in_service"] is True
        assert p["queues"] == [{"queue": 0, "worker": 0}]
        assert (p["rx_packets"], p["rx_bytes"], p["tx_packets"], p["tx_bytes"]) == (0, 0, 0, 0)


def test_show_neighbors(router: Daemon) -> None:
    """Every static neighbour, with its interface and MAC, in state static."""
    nbrs = router.json("show", "neighbors")
    assert {(n["interface"], n["ip"], n["mac"]) for n in nbrs} == NEIGHBORS
    assert len(nbrs) == len(NEIGHBORS)
    assert {n["state"] for n in nbrs} == {"static"}
    text = router.ok("show", "neighbors").splitlines()
    assert text[0].split() == ["Address", "MAC", "Interface", "State", "Age", "(s)"]
    assert "198.51.100.2 02:00:00:00:10:02 p0.100 static -" in [" ".join(ln.split()) for ln in text]


def test_show_counters_errors_and_workers(router: Daemon) -> None:
    """With no traffic: every port counts zero, there are no drops, and the one worker polls
    every port's queue."""
    c = router.json("show", "counters")
    assert [p["port"] for p in c["ports"]] == PORTS
    assert all(
        p[k] == 0 for p in c["ports"] for k in ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes")
    )
    assert (c["drops"], c["icmp_sent"], c["echo_replies"], c["slow_path"]) == (0, 0, 0, 0)
    assert router.json("show", "errors") == []
    assert router.ok("show", "errors").strip() == "no drops"
    workers = router.json("show", "workers")
    assert len(workers) == 1
    w = workers[0]
    assert w["id"] == 0 and w["core"] is None
    assert sorted(w["rx_queues"]) == [f"{p}/0" for p in PORTS]
    assert (w["rx_packets"], w["tx_packets"], w["drops"]) == (0, 0, 0)


def test_show_system_counts_every_table(router: Daemon) -> None:
    """`show system`: the first commit, one worker, four ports, and each table's entries equal
    to the routes the config makes, with the limits the config sets."""
    s = router.json("show", "system")
    assert s["commit"] == 1 and s["pending_confirm"] is None
    assert (s["workers"], s["ports"]) == (1, 4)
    assert s["version"] and s["uptime_s"] >= 0
    assert 0 < s["buffers_free"] <= s["buffers"]
    tables = {t["table"]: t for t in s["tables"]}
    expect = {
        "ipv4 routes vrf default": (len(ROUTES_V4), 100000),
        "ipv6 routes vrf default": (len(ROUTES_V6), 50000),
        "ipv4 routes vrf blue": (len(ROUTES_V4_BLUE), 100000),
        "ipv6 routes vrf blue": (len(ROUTES_V6_BLUE), 50000),
    }
    for name, (entries, limit) in expect.items():
        assert (tables[name]["entries"], tables[name]["limit"]) == (entries, limit), tables[name]
    assert tables["neighbors"]["entries"] == len(NEIGHBORS)
    # The API's own command times are reported too.
    assert s["api"]["show.system"]["count"] >= 1
    first = router.ok("show", "system").splitlines()[0]
    assert first.startswith("linerate ") and first.endswith("config commit 1")


def test_show_ip_route_is_the_whole_fib(router: Daemon) -> None:
    """`show ip route`: exactly the connected, local, neighbour and static routes of the
    config, in prefix order, each with its origin and `via NEIGHBOUR on INTERFACE`."""
    v = router.routes()
    assert (v["vrf"], v["family"]) == ("default", "ipv4")
    assert v["total"] == v["matched"] == len(ROUTES_V4)
    assert by_prefix(v) == ROUTES_V4
    prefixes = [r["prefix"] for r in v["routes"]]
    assert prefixes == sorted(prefixes, key=net_key)


def test_show_ipv6_route_and_vrf(router: Daemon) -> None:
    """`show ipv6 route`, and both families of VRF blue, hold what the config puts there; the
    same prefix (10.0.0.0/8) has its own next hop in each VRF."""
    v6 = router.routes(family="ipv6")
    assert (v6["family"], v6["total"]) == ("ipv6", len(ROUTES_V6))
    assert by_prefix(v6) == ROUTES_V6
    blue = router.routes("--vrf", "blue")
    assert blue["vrf"] == "blue"
    assert by_prefix(blue) == ROUTES_V4_BLUE
    assert by_prefix(router.routes("--vrf", "blue", family="ipv6")) == ROUTES_V6_BLUE
    r = router.fails("show", "ip", "route", "--vrf", "red")
    assert "red" in r.stderr


@pytest.mark.parametrize(
    "address, prefix",
    [
        ("10.1.2.3", "10.1.0.0/16"),          # the /16 beats the /8
        ("10.2.3.4", "10.0.0.0/8"),
        ("8.8.8.8", "0.0.0.0/0"),             # the ECMP default
        ("203.0.113.200", "203.0.113.128/25"),  # blackhole beats the connected /24
        ("203.0.113.7", "203.0.113.0/24"),
        ("203.0.113.1", "203.0.113.1/32"),    # the router's own address
        ("203.0.113.2", "203.0.113.2/32"),    # the neighbour's host route
    ],
)
def test_show_ip_route_address_is_longest_match(router: Daemon, address: str, prefix: str) -> None:
    """An address gives the one route a packet to it would take."""
    v = router.routes(address)
    assert v["matched"] == 1 and v["total"] == len(ROUTES_V4)
    assert by_prefix(v) == {prefix: ROUTES_V4[prefix]}


def test_show_ipv6_route_address_and_vrf_lookup(router: Daemon) -> None:
    """Longest match works for IPv6 and inside a VRF."""
    assert by_prefix(router.routes("2001:db8:ff12::1", family="ipv6")) == {
        "2001:db8:ff00::/40": ROUTES_V6["2001:db8:ff00::/40"]
    }
    assert by_prefix(router.routes("10.9.9.9", "--vrf", "blue")) == {
        "10.0.0.0/8": ("static", "forward", ["100.64.0.2 on p3"])
    }
    # Nothing in blue covers 8.8.8.8 (no default route there).
    assert router.routes("8.8.8.8", "--vrf", "blue")["routes"] == []
    # The wrong family is an error, not an empty answer.
    assert "IPv4" in router.fails("show", "ip", "route", "2001:db8::1").stderr


def test_show_ip_route_prefix_exact_and_longer(router: Daemon) -> None:
    """A prefix alone is an exact match; with --longer, it and everything inside it."""
    assert [r["prefix"] for r in router.routes("10.0.0.0/8")["routes"]] == ["10.0.0.0/8"]
    v = router.routes("10.0.0.0/8", "--longer")
    assert [r["prefix"] for r in v["routes"]] == ["10.0.0.0/8", "10.1.0.0/16"]
    assert v["matched"] == 2 and v["total"] == len(ROUTES_V4)
    v = router.routes("203.0.113.0/24", "--longer")
    assert [r["prefix"] for r in v["routes"]] == [
        "203.0.113.0/24", "203.0.113.1/32", "203.0.113.2/32", "203.0.113.128/25",
    ]
    assert router.routes("10.3.0.0/16")["routes"] == []  # no such prefix, exactly


def test_show_ip_route_human_output(router: Daemon) -> None:
    """The route table reads like a router's: a header with the VRF and count, the origin
    codes, and rows `CODE PREFIX via NEXTHOP on IF`."""
    lines = router.ok("show", "ip", "route").splitlines()
    assert lines[0] == f"VRF default, ipv4: {len(ROUTES_V4)} routes"
    assert lines[1].startswith("Codes: C connected, S static")
    rows = [" ".join(ln.split()) for ln in lines[3:]]
    assert "S 10.1.0.0/16 via 203.0.113.2 on p1" in rows
    assert "S 0.0.0.0/0 via 192.0.2.2 on p0, 198.51.100.2 on p0.100" in rows
    assert "C 198.18.2.0/24 directly connected, p2" in rows
    assert "N 198.51.100.2/32 via 198.51.100.2 on p0.100" in rows
    assert "S 203.0.113.128/25 blackhole" in rows
    assert len(rows) == len(ROUTES_V4) + 1  # and the column header
    # --limit keeps the first N and says how many more there are.
    limited = router.ok("show", "ip", "route", "--limit", "2").splitlines()
    assert limited[-1] == f"... {len(ROUTES_V4) - 2} more (use --limit 0 for all)"


def test_abbreviations(router: Daemon) -> None:
    """Unambiguous abbreviations work as on a router CLI; an ambiguous one is refused."""
    lines = router.ok("sh", "ip", "ro", "10.1.2.3").splitlines()
    assert lines[0] == f"VRF default, ipv4: {len(ROUTES_V4)} routes, 1 matched"
    assert " ".join(lines[-1].split()) == "S 10.1.0.0/16 via 203.0.113.2 on p1"
    assert by_prefix(router.json("sh", "ip", "ro", "10.1.2.3")) == {
        "10.1.0.0/16": ROUTES_V4["10.1.0.0/16"]
    }
    assert router.ok("sh", "int") == router.ok("show", "interfaces")
    r = router.cli("show", "i")  # interfaces? ip? ipv6?
    assert r.returncode != 0
    assert "interfaces" in r.stderr and "ip" in r.stderr
    assert r.stdout == ""


def test_show_logging_and_running_config(router: Daemon, linerate_bin: Path) -> None:
    """The log starts with SYSTEM_START; the running config is the file it booted from, byte
    for byte, and is commit 1."""
    log = router.json("show", "logging")
    start = [r for r in log if r["msgid"] == "SYSTEM_START"]
    assert len(start) == 1 and start[0]["severity"] == "notice"
    assert start[0]["params"] == [["version", router.json("show", "system")["version"]]]
    assert "SYSTEM_START" in router.ok("show", "logging")
    assert router.running() == CONFIG
    rc = router.json("show", "running-config")
    assert rc["text"] == CONFIG and rc["commit"] == 1
    assert Path(rc["source"]) == router.config.resolve()
    # The socket's file permissions are its access control: 0660.
    assert stat.S_IMODE(os.stat(router.socket).st_mode) == 0o660


def test_cli_without_a_router_says_so(linerate_bin: Path, tmp_path: Path) -> None:
    """A CLI command with no daemon behind the socket fails and names the socket."""
    sock = tmp_path / "nothing.sock"
    r = subprocess.run(
        [str(linerate_bin), "show", "system", "--socket", str(sock)],
        capture_output=True, text=True, timeout=30,
    )
    assert r.returncode != 0
    assert str(sock) in r.stderr


# --------------------------------------------------------------------------------------------
# 2. Config lifecycle
# --------------------------------------------------------------------------------------------

def test_config_diff_shows_a_unified_diff_and_changes_nothing(start_daemon) -> None:
    """`config diff NEW` prints what would change (a unified diff and one line per item) and
    applies nothing: routes, running config and history stay as they were."""
    r = start_daemon()
    new = write(r.dir / "new.yaml", NEW_CONFIG)
    routes_before, running_before = r.routes(), r.running()
    out = r.ok("config", "diff", str(new))
    lines = out.splitlines()
    assert lines[0] == "--- running (commit 1)"
    assert lines[1] == f"+++ {new.resolve()}"
    assert any(ln.startswith("@@ ") for ln in lines)
    assert "-  - { prefix: 10.1.0.0/16, via: 203.0.113.2 }" in lines
    assert "+  - { prefix: 10.2.0.0/16, via: 203.0.113.2 }" in lines
    assert "+ route 10.2.0.0/16 vrf default" in lines
    assert "- route 10.1.0.0/16 vrf default" in lines
    assert "~ interface p2" in lines
    assert lines[-1] == "dry run: nothing was applied"
    v = r.json("config", "diff", str(new))
    assert v["dry_run"] is True and v["changed"] is True and v["commit"] is None
    assert r.routes() == routes_before
    assert r.running() == running_before == CONFIG
    assert [c["id"] for c in r.history()] == [1]
    assert r.json("show", "system")["commit"] == 1


def test_config_apply_changes_routes_and_addresses(start_daemon) -> None:
    """`config apply NEW` makes NEW the running config at once: the new route is there, the old
    one is gone, p2 has its new address; the answer names commit 2, which the history lists
    with its comment and changes."""
    r = start_daemon()
    new = write(r.dir / "new.yaml", NEW_CONFIG)
    out = r.ok("config", "apply", str(new), "-m", "move 10.1/16 to 10.2/16")
    assert out.splitlines()[-1] == "commit 2 applied"
    assert r.running() == NEW_CONFIG
    assert by_prefix(r.routes("10.2.3.4")) == {
        "10.2.0.0/16": ("static", "forward", ["203.0.113.2 on p1"])
    }
    assert "10.1.0.0/16" not in by_prefix(r.routes())
    assert by_prefix(r.routes("10.1.2.3")) == {"10.0.0.0/8": ROUTES_V4["10.0.0.0/8"]}
    p2 = next(i for i in r.json("show", "interfaces") if i["name"] == "p2")
    assert p2["ipv4"] == ["198.18.3.1/24"]
    assert "198.18.3.0/24" in by_prefix(r.routes()) and "198.18.2.0/24" not in by_prefix(r.routes())
    hist = r.history()
    assert [(c["id"], c["status"]) for c in hist] == [(1, "committed"), (2, "committed")]
    assert hist[0]["comment"] == "startup"
    assert hist[1]["comment"] == "move 10.1/16 to 10.2/16"
    assert "+ route 10.2.0.0/16 vrf default" in hist[1]["summary"]
    assert Path(hist[1]["source"]) == new.resolve()
    assert r.json("show", "system")["commit"] == 2
    assert r.json("config", "show", "2")["text"] == NEW_CONFIG
    # Applying the same text again is not a commit.
    again = r.json("config", "apply", str(new))
    assert again["changed"] is False and again["commit"] is None
    assert len(r.history()) == 2


@pytest.mark.parametrize(
    "case",
    ["unknown-port", "bad-address", "unknown-key"],
)
def test_a_config_with_errors_is_rejected_and_changes_nothing(start_daemon, case: str) -> None:
    """A config with a mistake is refused whole: the error names file:line:col and the field,
    the exit status is not 0, and the running config is byte-identical to before."""
    if case == "unknown-port":
        text = CONFIG.replace("{ name: p2, port: p2,", "{ name: p2, port: p9,")
        line, col = line_col(text, "name: p2, port: p9", "{")
        field, message = "interfaces[3]", "interface `p2`: no port named `p9`"
    elif case == "bad-address":
        text = CONFIG.replace("[203.0.113.1/24]", "[203.0.113.300/24]")
        line, col = line_col(text, "203.0.113.300/24", "203.0.113.300/24")
        field, message = "interfaces[2].ipv4[0]", "`203.0.113.300/24` is not an IPv4 address"
    else:
        text = CONFIG.replace("router: { workers: 1 }", "router: { workers: 1, colour: red }")
        line, col = line_col(text, "colour", "red")
        field, message = "router.colour", "unknown key `colour`"
    r = start_daemon()
    bad = write(r.dir / "bad.yaml", text)
    before = r.running()
    routes_before = r.routes()
    p = r.fails("config", "apply", str(bad))
    assert "nothing was changed" in p.stderr
    assert f"{bad.resolve()}:{line}:{col}: {field}: {message}" in p.stderr, p.stderr
    # A diff of it is refused the same way.
    assert f":{line}:{col}: {field}:" in r.fails("config", "diff", str(bad)).stderr
    assert r.running() == before == CONFIG
    assert r.routes() == routes_before
    assert [c["id"] for c in r.history()] == [1]


def test_rollback_restores_the_config_text_and_routes(start_daemon) -> None:
    """`config rollback 1` after a change makes commit 1's text the running config again,
    exactly, with its routes; the rollback is itself a new commit."""
    r = start_daemon()
    before_text, before_routes = r.running(), r.routes()
    r.ok("config", "apply", str(write(r.dir / "new.yaml", NEW_CONFIG)))
    assert r.running() == NEW_CONFIG
    out = r.ok("config", "rollback", "1")
    assert out.splitlines()[-1] == "commit 3 applied"
    assert r.running() == before_text == CONFIG
    assert r.routes() == before_routes
    hist = r.history()
    assert [c["id"] for c in hist] == [1, 2, 3]
    assert hist[2]["comment"] == "rollback to commit 1"
    assert r.json("config", "show", "3")["text"] == CONFIG
    assert "CONFIG_ROLLBACK" in [x["msgid"] for x in r.json("show", "logging")]
    assert "no commit 9" in r.fails("config", "rollback", "9").stderr


def test_commit_confirmed_rolls_back_by_itself(start_daemon) -> None:
    """`config apply NEW --confirm 2` without `config confirm`: NEW runs for about 2 s, then the
    previous config comes back by itself, and the history marks the commit rolled-back."""
    r = start_daemon()
    new = write(r.dir / "new.yaml", NEW_CONFIG)
    t0 = time.monotonic()
    out = r.ok("config", "apply", str(new), "--confirm", "2")
    assert "commit 2 applied; it rolls back in 2 s unless `linerate config confirm`" in out
    assert r.running() == NEW_CONFIG
    pending = r.json("show", "system")["pending_confirm"]
    assert pending[0] == 2 and 0 <= pending[1] <= 2
    wait_until(lambda: r.running() == CONFIG, 6, "the automatic rollback")
    assert time.monotonic() - t0 >= 1.8, "rolled back before its time"
    assert by_prefix(r.routes("10.1.2.3")) == {"10.1.0.0/16": ROUTES_V4["10.1.0.0/16"]}
    hist = r.history()
    assert [(c["id"], c["status"]) for c in hist] == [
        (1, "committed"), (2, "rolled-back"), (3, "committed"),
    ]
    assert hist[2]["comment"] == "automatic rollback: commit 2 was not confirmed"
    assert r.json("show", "system")["pending_confirm"] is None
    log = [x for x in r.json("show", "logging") if x["msgid"] == "CONFIG_ROLLBACK"]
    assert log and log[-1]["severity"] == "warning"


def test_commit_confirmed_then_confirm_stays(start_daemon) -> None:
    """`config apply NEW --confirm 5` then `config confirm`: NEW is still running after the 5 s,
    and the history marks it confirmed. A second confirm has nothing to confirm."""
    r = start_daemon()
    new = write(r.dir / "new.yaml", NEW_CONFIG)
    t0 = time.monotonic()
    r.ok("config", "apply", str(new), "--confirm", "5")
    assert r.ok("config", "confirm").strip() == "commit 2 confirmed"
    assert r.json("show", "system")["pending_confirm"] is None
    time.sleep(max(0.0, 5.7 - (time.monotonic() - t0)))
    assert r.running() == NEW_CONFIG
    assert [(c["id"], c["status"]) for c in r.history()] == [(1, "committed"), (2, "confirmed")]
    assert "no commit is waiting" in r.fails("config", "confirm").stderr


def test_a_commit_during_a_confirm_window_is_not_rolled_back(start_daemon) -> None:
    """A plain `config apply` made while a commit-confirmed waits confirms it (as on Junos and
    IOS XR): when the timer runs out, the newer commit is not thrown away with it.

    Regression: the timer used to roll back to the config before the commit-confirmed,
    silently discarding the plain commit made after it."""
    r = start_daemon()
    r.ok("config", "apply", str(write(r.dir / "new.yaml", NEW_CONFIG)), "--confirm", "2")
    r.ok("config", "apply", str(write(r.dir / "new2.yaml", NEW_CONFIG_2)), "-m", "plain")
    assert r.json("show", "system")["pending_confirm"] is None
    time.sleep(3.0)
    assert r.running() == NEW_CONFIG_2
    assert [(c["id"], c["status"]) for c in r.history()] == [
        (1, "committed"), (2, "confirmed"), (3, "committed"),
    ]


def test_running_config_persists_across_restarts(start_daemon) -> None:
    """After `config apply`, a restart (SIGTERM, then the same command line, still naming the
    ORIGINAL file in --config) runs the applied config: the last commit persists, and so does
    the history; the daemon says it booted from the state folder."""
    r = start_daemon()
    r.ok("config", "apply", str(write(r.dir / "new.yaml", NEW_CONFIG)), "-m", "persist me")
    hist_before = r.history()
    assert r.stop() == 0, r.stderr()
    r.start()
    assert r.config.read_text() == CONFIG  # still the original file on the command line
    assert r.running() == NEW_CONFIG
    assert "10.2.0.0/16" in by_prefix(r.routes())
    assert r.history() == hist_before
    assert [c["comment"] for c in r.history()] == ["startup", "persist me"]
    assert r.json("show", "system")["commit"] == 2
    assert "booting from the running config" in r.stderr()
    # The next commit carries on the numbering.
    out = r.ok("config", "rollback", "1")
    assert out.splitlines()[-1] == "commit 3 applied"
    assert r.running() == CONFIG


# --------------------------------------------------------------------------------------------
# 3. Run-time changes: routes, ports, workers, counters
# --------------------------------------------------------------------------------------------

def test_route_add_and_del_through_the_api(start_daemon) -> None:
    """`route add` puts a route of origin `api` in the FIB (IPv4, IPv6, ECMP, blackhole, in a
    VRF); `route del` takes it out again; the tables' counts follow."""
    r = start_daemon()
    r.ok("route", "add", "172.16.0.0/12", "via", "192.0.2.2")
    assert by_prefix(r.routes("172.16.0.0/12")) == {
        "172.16.0.0/12": ("api", "forward", ["192.0.2.2 on p0"])
    }
    assert [x["prefix"] for x in r.routes("172.20.1.1")["routes"]] == ["172.16.0.0/12"]
    r.ok("route", "add", "172.32.0.0/16", "via", "203.0.113.2,192.0.2.2")
    assert by_prefix(r.routes("172.32.0.0/16")) == {
        "172.32.0.0/16": ("api", "ecmp", ["192.0.2.2 on p0", "203.0.113.2 on p1"])
    }
    r.ok("route", "add", "172.33.0.0/16", "blackhole")
    assert by_prefix(r.routes("172.33.0.0/16"))["172.33.0.0/16"] == ("api", "blackhole", [])
    r.ok("route", "add", "2001:db8:aa::/48", "via", "2001:db8:1::2")
    assert by_prefix(r.routes("2001:db8:aa::1", family="ipv6")) == {
        "2001:db8:aa::/48": ("api", "forward", ["2001:db8:1::2 on p0"])
    }
    r.ok("route", "add", "172.16.0.0/12", "via", "100.64.0.2", "--vrf", "blue")
    assert by_prefix(r.routes("172.16.0.0/12", "--vrf", "blue")) == {
        "172.16.0.0/12": ("api", "forward", ["100.64.0.2 on p3"])
    }
    rows = [" ".join(ln.split()) for ln in r.ok("show", "ip", "route", "172.16.0.0/12").splitlines()]
    assert "A 172.16.0.0/12 via 192.0.2.2 on p0" in rows
    tables = {t["table"]: t["entries"] for t in r.json("show", "system")["tables"]}
    assert tables["ipv4 routes vrf default"] == len(ROUTES_V4) + 3
    assert tables["ipv6 routes vrf default"] == len(ROUTES_V6) + 1
    assert tables["ipv4 routes vrf blue"] == len(ROUTES_V4_BLUE) + 1

    r.ok("route", "del", "172.16.0.0/12")
    assert r.routes("172.16.0.0/12")["routes"] == []
    assert [x["prefix"] for x in r.routes("172.20.1.1")["routes"]] == ["0.0.0.0/0"]
    # Only the default VRF's route went.
    assert [x["prefix"] for x in r.routes("172.16.0.0/12", "--vrf", "blue")["routes"]] == [
        "172.16.0.0/12"
    ]
    assert "not a route added through the API" in r.fails("route", "del", "172.16.0.0/12").stderr
    for p in ("172.32.0.0/16", "172.33.0.0/16"):
        r.ok("route", "del", p)
    r.ok("route", "del", "2001:db8:aa::/48")
    r.ok("route", "del", "172.16.0.0/12", "--vrf", "blue")
    assert by_prefix(r.routes()) == ROUTES_V4
    assert by_prefix(r.routes(family="ipv6")) == ROUTES_V6
    assert by_prefix(r.routes("--vrf", "blue")) == ROUTES_V4_BLUE


def test_route_add_refusals_change_nothing(start_daemon) -> None:
    """An API route over a configured prefix is refused (configured routes take precedence),
    as is one via an address that is not a neighbour, and a configured route cannot be
    deleted through the API; the FIB is untouched by all of them."""
    r = start_daemon()
    before = r.routes()
    p = r.fails("route", "add", "10.0.0.0/8", "via", "203.0.113.2")
    assert "configured route" in p.stderr and "10.0.0.0/8" in p.stderr
    # Neither a neighbour nor on a connected subnet (one on a subnet is resolved by ARP).
    p = r.fails("route", "add", "172.20.0.0/16", "via", "100.64.0.99")
    assert "100.64.0.99" in p.stderr and "not a neighbor" in p.stderr
    r.fails("route", "add", "172.20.0.0/33", "via", "192.0.2.2")
    r.fails("route", "add", "172.20.0.1/16", "via", "192.0.2.2")  # host bits set
    r.fails("route", "add", "172.20.0.0/16", "via", "192.0.2.2", "--vrf", "red")
    assert "not a route added through the API" in r.fails("route", "del", "10.0.0.0/8").stderr
    assert r.routes() == before


def test_api_routes_survive_a_commit(start_daemon) -> None:
    """A route added through the API is still there, still `api`, after a config commit."""
    r = start_daemon()
    r.ok("route", "add", "172.16.0.0/12", "via", "192.0.2.2")
    r.ok("config", "apply", str(write(r.dir / "new.yaml", NEW_CONFIG)))
    assert by_prefix(r.routes("172.16.0.0/12")) == {
        "172.16.0.0/12": ("api", "forward", ["192.0.2.2 on p0"])
    }
    r.ok("route", "del", "172.16.0.0/12")


def test_config_diff_leaves_api_routes_alone(start_daemon) -> None:
    """`config diff` of a config that would drop an API route (its next hop is no longer a
    neighbour) warns about it and changes nothing: the route is still `api` and can still be
    deleted. Applying that config does drop it.

    Regression: a dry run used to forget API routes it would drop, leaving them in the FIB as
    origin `file`, impossible to delete."""
    r = start_daemon()
    r.ok("route", "add", "172.16.0.0/12", "via", "198.18.2.2")
    other = write(r.dir / "other.yaml", WITHOUT_P2_NEIGHBOR)
    v = r.json("config", "diff", str(other))
    assert any("172.16.0.0/12" in w and "dropped" in w for w in v["warnings"]), v["warnings"]
    assert by_prefix(r.routes("172.16.0.0/12")) == {
        "172.16.0.0/12": ("api", "forward", ["198.18.2.2 on p2"])
    }
    applied = r.json("config", "apply", str(other))
    assert any("172.16.0.0/12" in w for w in applied["warnings"])
    assert r.routes("172.16.0.0/12")["routes"] == []
    assert r.fails("route", "del", "172.16.0.0/12")


def test_a_configured_route_takes_over_an_api_route_on_commit(start_daemon) -> None:
    """If a commit configures a prefix an API route holds, the configured route wins (as
    `route add` over a configured prefix is refused): the commit warns, the FIB has the static
    route, and it is no longer an API route.

    Regression: the API route used to be re-added over the configured one on every commit."""
    r = start_daemon()
    r.ok("route", "add", "172.16.0.0/12", "via", "192.0.2.2")
    v = r.json("config", "apply", str(write(r.dir / "static.yaml", WITH_STATIC_172)))
    assert v["commit"] == 2
    assert any("172.16.0.0/12" in w for w in v["warnings"]), v["warnings"]
    assert by_prefix(r.routes("172.16.0.0/12")) == {
        "172.16.0.0/12": ("static", "forward", ["203.0.113.2 on p1"])
    }
    assert "not a route added through the API" in r.fails("route", "del", "172.16.0.0/12").stderr
    fams = metric_families(r.ok("show", "metrics"))
    assert samples(fams["linerate_api_routes"]) == {(): 0.0}


def test_port_remove_and_insert(start_daemon) -> None:
    """`port remove p0` takes p0 out of service as if pulled: its interfaces (p0 and the VLAN
    sub-interface p0.100) go operationally down, routes through them show `(down)`, its queue
    is parked; no other port or interface changes. `port insert p0` puts everything back."""
    r = start_daemon()
    assert r.ok("port", "remove", "p0").strip() == "port p0 out of service"
    ifs = {i["name"]: i for i in r.json("show", "interfaces")}
    for name, i in ifs.items():
        on_p0 = INTERFACES[name][0] == "p0"
        assert i["admin_up"] is True
        assert i["oper_up"] is (not on_p0), i
    rows = {ln.split()[0]: ln.split() for ln in r.ok("show", "interfaces").splitlines()[1:]}
    assert rows["p0.100"][3] == "up/down" and rows["p1"][3] == "up/up"
    ports = {p["name"]: p for p in r.json("show", "ports")}
    assert ports["p0"]["in_service"] is False and ports["p0"]["queues"] == []
    assert all(ports[p]["in_service"] for p in ("p1", "p2", "p3"))
    assert by_prefix(r.routes("10.0.0.0/8"))["10.0.0.0/8"][2] == ["192.0.2.2 on p0 (down)"]
    assert by_prefix(r.routes("10.1.0.0/16"))["10.1.0.0/16"][2] == ["203.0.113.2 on p1"]
    fams = metric_families(r.ok("show", "metrics"))
    up = samples(fams["linerate_port_up"])
    assert up[(("port", "p0"),)] == 0 and up[(("port", "p1"),)] == 1
    assert samples(fams["linerate_interface_up"])[(("interface", "p0.100"),)] == 0
    assert "already out of service" in r.fails("port", "remove", "p0").stderr

    assert r.ok("port", "insert", "p0").strip() == "port p0 in service"
    assert all(i["oper_up"] for i in r.json("show", "interfaces"))
    ports = {p["name"]: p for p in r.json("show", "ports")}
    assert ports["p0"]["in_service"] is True
    assert ports["p0"]["queues"] == [{"queue": 0, "worker": 0}]
    assert by_prefix(r.routes()) == ROUTES_V4
    assert "in service" in r.fails("port", "insert", "p0").stderr
    assert "no port `p9`" in r.fails("port", "remove", "p9").stderr
    log = [x["msgid"] for x in r.json("show", "logging")]
    # (Each command is accounted in a COMMAND record too: test_event_manager.py checks those.)
    assert [m for m in log if m not in ("SYSTEM_START", "COMMAND")] == [
        "PORT_REMOVED", "LINK_DOWN", "LINK_DOWN", "PORT_INSERTED", "LINK_UP", "LINK_UP",
    ]


def test_worker_add_and_remove(start_daemon) -> None:
    """`worker add` starts a second worker and spreads the four receive queues two and two;
    `worker remove 0` hands worker 0's queues to worker 1; the last worker cannot be removed,
    nor can one that does not exist."""
    r = start_daemon()
    assert r.ok("worker", "add").strip() == "worker 1 started"
    ws = r.json("show", "workers")
    assert [w["id"] for w in ws] == [0, 1]
    queues = [set(w["rx_queues"]) for w in ws]
    assert [len(q) for q in queues] == [2, 2]
    assert queues[0] | queues[1] == {f"{p}/0" for p in PORTS}
    # `show ports` agrees on who polls what.
    for p in r.json("show", "ports"):
        (q,) = p["queues"]
        owner = next(w["id"] for w in ws if f"{p['name']}/0" in w["rx_queues"])
        assert q["worker"] == owner
    assert r.json("show", "system")["workers"] == 2

    assert r.ok("worker", "remove", "0").strip() == "worker 0 removed"
    ws = r.json("show", "workers")
    assert [w["id"] for w in ws] == [1]
    assert sorted(ws[0]["rx_queues"]) == [f"{p}/0" for p in PORTS]
    assert "last worker" in r.fails("worker", "remove", "1").stderr
    assert "no worker 7" in r.fails("worker", "remove", "7").stderr
    assert [w["id"] for w in r.json("show", "workers")] == [1]
    assert r.json("show", "system")["workers"] == 1


def test_clear_counters(start_daemon) -> None:
    """`clear counters` starts the shows' counters afresh and is logged."""
    r = start_daemon()
    assert r.json("show", "counters")["since_clear"] is False
    assert r.ok("clear", "counters").strip() == "counters cleared"
    c = r.json("show", "counters")
    assert c["since_clear"] is True and c["drops"] == 0
    rec = [x for x in r.json("show", "logging") if x["msgid"] == "COUNTERS_CLEARED"]
    assert len(rec) == 1 and rec[0]["severity"] == "info"


def test_capture_and_trace_without_traffic(start_daemon) -> None:
    """With nothing sending, `capture` stops at its timeout and writes a valid, empty pcap
    (nanosecond pcap header, Ethernet link type), and `trace` says no frame matched; a filter
    that is not tcpdump's syntax and an unknown port are refused."""
    r = start_daemon()
    out = r.dir / "p0.pcap"
    p = r.cli("capture", "-i", "p0", "-c", "5", "--timeout", "0.5", "-w", str(out),
              "udp and dst net 10.0.0.0/8")
    assert p.returncode == 0, p.stderr
    assert f"0 frames written to {out}" in p.stderr
    data = out.read_bytes()
    assert len(data) == 24  # the global header only
    assert data[:4] == bytes.fromhex("4d3cb2a1")  # 0xa1b23c4d little-endian: ns timestamps
    assert int.from_bytes(data[20:24], "little") == 1  # LINKTYPE_ETHERNET
    assert "expected a primitive" in r.fails(
        "capture", "-c", "1", "--timeout", "0.2", "-w", str(r.dir / "x.pcap"), "udp and"
    ).stderr
    assert "no port `p9`" in r.fails(
        "capture", "-i", "p9", "-c", "1", "--timeout", "0.2", "-w", str(r.dir / "y.pcap")
    ).stderr
    assert r.ok("trace", "-c", "1", "--timeout", "0.3").strip() == (
        "no frame matched before the timeout"
    )
    assert json.loads(r.ok("trace", "-c", "1", "--timeout", "0.3", "--json")) == []


# --------------------------------------------------------------------------------------------
# 4. Metrics
# --------------------------------------------------------------------------------------------

def check_exposition(text: str, system: dict, api_routes: int = 0) -> dict[str, Any]:
    """Checks an exposition of a router started from CONFIG (plus `api_routes` IPv4 routes
    added through the API) against `show system --json`."""
    fams = metric_families(text)
    for name, f in fams.items():
        assert f.documentation, f"{name} has no HELP"
        assert f.type in ("counter", "gauge"), f"{name} has type {f.type}"
        suffix = "_total" if f.type == "counter" else ""
        assert f"# HELP {name}{suffix} " in text and f"# TYPE {name}{suffix} {f.type}" in text
    for name in ("linerate_port_rx_packets", "linerate_port_tx_packets",
                 "linerate_port_rx_bytes", "linerate_port_tx_bytes"):
        assert fams[name].type == "counter"
        assert samples(fams[name], name + "_total") == {(("port", p),): 0.0 for p in PORTS}
    drops = fams["linerate_drops"]
    assert drops.type == "counter" and drops.samples
    for s in drops.samples:
        assert s.name == "linerate_drops_total"
        assert set(s.labels) == {"worker", "node", "reason"}
        assert s.labels["worker"] == "0" and s.value == 0
    reasons = {(s.labels["node"], s.labels["reason"]) for s in drops.samples}
    # Each reason under the node of the graph that owns it (the slow path answers no-route
    # with an ICMP error; the forwarding node drops into a null route itself).
    assert ("slow-path", "NoRoute") in reasons and ("ip4-forward", "Blackhole") in reasons
    tables = {t["table"]: t for t in system["tables"]}
    assert fams["linerate_table_entries"].type == "gauge"
    assert fams["linerate_table_limit"].type == "gauge"
    entries = {s.labels["table"]: s.value for s in fams["linerate_table_entries"].samples}
    limits = {s.labels["table"]: s.value for s in fams["linerate_table_limit"].samples}
    assert entries == {k: float(t["entries"]) for k, t in tables.items()}
    assert limits == {k: float(t["limit"]) for k, t in tables.items()}
    assert entries["ipv4 routes vrf default"] == len(ROUTES_V4) + api_routes
    assert entries["ipv6 routes vrf default"] == len(ROUTES_V6)
    assert samples(fams["linerate_api_routes"]) == {(): float(api_routes)}
    assert limits["ipv4 routes vrf default"] == 100000
    assert samples(fams["linerate_workers"]) == {(): 1.0}
    assert samples(fams["linerate_port_up"]) == {(("port", p),): 1.0 for p in PORTS}
    assert samples(fams["linerate_interface_up"]) == {
        (("interface", i),): 1.0 for i in INTERFACES
    }
    assert samples(fams["linerate_config_commit"]) == {(): float(system["commit"])}
    assert fams["linerate_uptime_seconds"].samples[0].value >= 0
    return fams


def test_show_metrics_is_valid_prometheus(start_daemon) -> None:
    """`show metrics` is the Prometheus text format: the client library parses it, every family
    has HELP and TYPE, per-port counters carry a `port` label for each configured port, drops
    carry worker/node/reason, and the table gauges equal what `show system` reports, also
    after a route is added through the API."""
    r = start_daemon()
    check_exposition(r.ok("show", "metrics"), r.json("show", "system"))
    r.ok("route", "add", "172.16.0.0/12", "via", "192.0.2.2")
    fams = check_exposition(r.ok("show", "metrics"), r.json("show", "system"), api_routes=1)
    cmds = {s.labels["command"] for s in fams["linerate_api_commands"].samples}
    assert {"route.add", "show.system"} <= cmds


def test_metrics_listener_for_prometheus(start_daemon) -> None:
    """`--metrics 127.0.0.1:PORT` serves the same exposition at /metrics without a token, with
    the text format's content type, and nothing else."""
    port = free_tcp_port()
    r = start_daemon(extra=("--metrics", f"127.0.0.1:{port}"))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        scraped = resp.read().decode()
    fams = check_exposition(scraped, r.json("show", "system"))
    assert set(fams) == set(metric_families(r.ok("show", "metrics")))
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/system", timeout=10)
    assert e.value.code == 404


# --------------------------------------------------------------------------------------------
# 5. The API on TCP
# --------------------------------------------------------------------------------------------

def raw_get(port: int, path: str, token: str | None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_tcp_api_needs_the_token(start_daemon, linerate_bin: Path, tmp_path: Path) -> None:
    """With `--listen ADDR --token-file F`, the CLI reaches the router over TCP with the
    token; a request without it, or with a wrong one, gets 401 and nothing else."""
    token = "k3y-" + "0123456789abcdef" * 2
    tok = write(tmp_path / "token", token + "\n")
    port = free_tcp_port()
    r = start_daemon(extra=("--listen", f"127.0.0.1:{port}", "--token-file", str(tok)))
    api = ("--api", f"127.0.0.1:{port}", "--token-file", str(tok))
    p = subprocess.run(
        [str(linerate_bin), "show", "system", "--json", *api],
        capture_output=True, text=True, timeout=30,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["commit"] == 1
    p = subprocess.run(
        [str(linerate_bin), "sh", "ip", "ro", "10.1.2.3", "--json", *api],
        capture_output=True, text=True, timeout=30,
    )
    assert p.returncode == 0 and by_prefix(json.loads(p.stdout)) == {
        "10.1.0.0/16": ROUTES_V4["10.1.0.0/16"]
    }

    status, body = raw_get(port, "/v1/system", None)
    assert status == 401 and json.loads(body)["kind"] == "unauthorized"
    wrong = token[:-1] + ("x" if token[-1] != "x" else "y")  # same length, last byte differs
    for bad in (wrong, token[:-1], "", token + "x"):
        status, _ = raw_get(port, "/v1/system", bad)
        assert status == 401, bad
    status, _ = raw_get(port, "/metrics", None)
    assert status == 401
    status, body = raw_get(port, "/v1/system", token)
    assert status == 200 and json.loads(body)["commit"] == 1
    # A changing command over TCP without the token changes nothing.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/v1/ports/p0/remove", body=b"{}")
    assert conn.getresponse().status == 401
    conn.close()
    assert r.json("show", "ports")[0]["in_service"] is True
    # The CLI with the wrong token fails.
    wrong_file = write(tmp_path / "wrong", wrong)
    p = subprocess.run(
        [str(linerate_bin), "show", "system", "--api", f"127.0.0.1:{port}",
         "--token-file", str(wrong_file)],
        capture_output=True, text=True, timeout=30,
    )
    assert p.returncode != 0


def test_tcp_tokens_name_their_holders_and_roles(start_daemon, linerate_bin: Path,
                                                tmp_path: Path) -> None:
    """A token file of `NAME ROLE SECRET` lines: each holder is the user accounting names
    (`noc@127.0.0.1`), an admin token changes things, a read-only one reads and is refused a
    change (403), and the refusal is logged with the holder's name."""
    noc, grafana = "n0c-" + "0123456789abcdef" * 2, "gr4f-" + "fedcba9876543210" * 2
    tokens = write(tmp_path / "tokens", f"# API tokens\nnoc admin {noc}\n"
                                        f"grafana read-only {grafana}  # dashboards\n")
    port = free_tcp_port()
    r = start_daemon(extra=("--listen", f"127.0.0.1:{port}", "--token-file", str(tokens)))

    def run(secret_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(linerate_bin), *args, "--api", f"127.0.0.1:{port}",
                               "--token-file", str(secret_file)],
                              capture_output=True, text=True, timeout=30)

    ro = write(tmp_path / "grafana", f"grafana read-only {grafana}\n")
    rw = write(tmp_path / "noc", noc + "\n")
    p = run(ro, "show", "system", "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["commit"] == 1, p.stderr
    p = run(ro, "port", "remove", "p0")
    assert p.returncode != 0 and "grafana@127.0.0.1: read-only" in p.stderr, p.stderr
    assert r.json("show", "ports")[0]["in_service"] is True
    p = run(rw, "clear", "counters")
    assert p.returncode == 0, p.stderr
    texts = [x["text"] for x in r.json("show", "logging", "-n", "50") if x["msgid"] == "COMMAND"]
    assert any(t.startswith("grafana@127.0.0.1 on ") and "port remove p0" in t
               and t.endswith("(refused: read-only)") for t in texts), texts
    assert any(t.startswith("noc@127.0.0.1 on ") and "clear counters" in t
               and "refused" not in t for t in texts), texts
    # A mistake in the file names its line, and the daemon does not start.
    bad = write(tmp_path / "bad", f"noc admin {noc}\nops superuser {grafana}\n")
    (tmp_path / "r2.yaml").write_text(CONFIG)
    p = subprocess.run(
        [str(linerate_bin), "daemon", "--config", str(tmp_path / "r2.yaml"), "--no-state",
         "--socket", str(tmp_path / "api2.sock"),
         "--listen", f"127.0.0.1:{free_tcp_port()}", "--token-file", str(bad)],
        capture_output=True, text=True, timeout=30,
    )
    assert p.returncode != 0 and f"{bad}:2: role `superuser`" in p.stderr, p.stderr


def test_tcp_api_refuses_a_short_token(linerate_bin: Path, tmp_path: Path) -> None:
    """A token shorter than 16 characters is refused: the daemon does not start."""
    (tmp_path / "router.yaml").write_text(CONFIG)
    tok = write(tmp_path / "token", "short-token\n")
    p = subprocess.run(
        [str(linerate_bin), "daemon", "--config", str(tmp_path / "router.yaml"), "--no-state",
         "--socket", str(tmp_path / "api.sock"),
         "--listen", f"127.0.0.1:{free_tcp_port()}", "--token-file", str(tok)],
        capture_output=True, text=True, timeout=30,
    )
    assert p.returncode != 0
    assert "at least 16 characters" in p.stderr


# --------------------------------------------------------------------------------------------
# 6. Syslog
# --------------------------------------------------------------------------------------------

LOCAL7 = 23
SEVERITY = {"warning": 4, "notice": 5, "info": 6}


@pytest.fixture
def rsyslog(tmp_path: Path) -> Iterator[Rsyslog]:
    with rsyslog_server(tmp_path) as srv:
        yield srv


def test_syslog_rfc5424_to_server_and_file(start_daemon, rsyslog: Rsyslog) -> None:
    """With `logging: { servers: [...], file: ... }`, every event reaches rsyslog as an RFC 5424
    record (app-name linerate, the daemon's pid, the machine's hostname, PRI for local7 and the
    event's severity, structured data naming the port/interface/worker/commit), the same
    records are in the file one per line, and `show logging` lists them."""
    logging_yaml = f'logging: {{ servers: ["127.0.0.1:{rsyslog.port}"], file: log.txt }}\n'
    r = start_daemon(CONFIG + logging_yaml)
    new = write(r.dir / "new.yaml", NEW_CONFIG + logging_yaml)
    applied = r.json("config", "apply", str(new), "-m", 'move "10.1" [to 10.2]')
    r.ok("port", "remove", "p0")
    r.ok("port", "insert", "p0")
    r.ok("worker", "add")
    r.ok("worker", "remove", "1")
    expected = [
        # (msgid, severity, structured-data params)
        ("SYSTEM_START", "notice", [("version", r.json("show", "system")["version"])]),
        ("CONFIG_COMMIT", "notice", [
            ("commit", "2"), ("changes", str(len(applied["summary"]))),
            ("comment", 'move "10.1" [to 10.2]'),
        ]),
        ("PORT_REMOVED", "warning", [("port", "p0")]),
        ("LINK_DOWN", "warning", [("interface", "p0")]),
        ("LINK_DOWN", "warning", [("interface", "p0.100")]),
        ("PORT_INSERTED", "notice", [("port", "p0")]),
        ("LINK_UP", "notice", [("interface", "p0")]),
        ("LINK_UP", "notice", [("interface", "p0.100")]),
        ("WORKER_ADDED", "notice", [("worker", "1"), ("core", "any")]),
        ("WORKER_REMOVED", "notice", [("worker", "1")]),
    ]
    recs = rsyslog.wait_for(
        lambda rs: sum(1 for x in rs if x["msgid"] == "WORKER_REMOVED") >= 1, timeout=10
    )
    hostname = Path("/proc/sys/kernel/hostname").read_text().strip()
    got = []
    for rec in recs:
        assert rec["protocol-version"] == "1", rec
        assert rec["app-name"] == "linerate", rec
        assert rec["procid"] == str(r.pid), rec
        assert rec["hostname"] == hostname, rec
        assert rec["facility"] == LOCAL7, rec
        assert rec["pri"] == LOCAL7 * 8 + rec["severity"], rec
        sd = parse_structured_data(rec["structured-data"])
        params = sd[0][1] if sd else []
        if sd:
            assert [e[0] for e in sd] == ["linerate@32473"]
        got.append((rec["msgid"], rec["severity"], params))
    # Every command is accounted (COMMAND, with its user) and goes to the servers like the rest.
    commands = [p for m, _, p in got if m == "COMMAND"]
    assert commands and all(("user", "root") in p for p in commands), commands
    got = [g for g in got if g[0] != "COMMAND"]
    assert got == [(m, SEVERITY[s], p) for m, s, p in expected]
    by_id = {rec["msgid"]: rec for rec in recs}
    assert by_id["CONFIG_COMMIT"]["msg"].startswith("config commit 2 applied")
    assert by_id["PORT_REMOVED"]["pri"] == 188 and by_id["PORT_INSERTED"]["pri"] == 189
    assert by_id["WORKER_REMOVED"]["msg"] == "worker 1 removed"
    stamps = [rec["timestamp"] for rec in recs]
    assert stamps == sorted(stamps) and all(s.endswith("Z") for s in stamps)

    # The file holds the same records, one per line, in the same order.
    lines = (r.dir / "log.txt").read_text().splitlines()
    assert lines == [rec["rawmsg"] for rec in recs]

    # `show logging` lists them too, with severities by name and the same parameters.
    shown = [
        (x["msgid"], x["severity"], [tuple(p) for p in x["params"]])
        for x in r.json("show", "logging")
        if x["msgid"] != "COMMAND"
    ]
    assert shown == expected
    text = [t for t in r.ok("show", "logging", "-n", "6").splitlines() if " COMMAND " not in t]
    assert len(text) >= 2
    text = text[-2:]
    assert text[0].split()[1:3] == ["notice", "WORKER_ADDED"]
    assert text[1].split()[1:3] == ["notice", "WORKER_REMOVED"]
