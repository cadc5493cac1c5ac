"""Network namespaces, veth pairs and the processes run in them, with cleanup that always runs.

    with Testbed(tmp_path) as tb:
        a, b = tb.netns("a"), tb.netns("b")
        tb.veth(a, "a0", b, "b0")
        a.addr("a0", "192.0.2.1/30", "2001:db8::1/64")
        b.addr("b0", "192.0.2.2/30", "2001:db8::2/64")
        assert a.ping("192.0.2.2")

Names: every namespace is `lrt-<pid>-<n>[-label]` (pid of the Python process that made it, n a
counter), so parallel runs never collide, and `sweep_stale()` can tell a namespace whose maker is
dead (a run killed with SIGKILL, a crashed CI) from one that is in use, and remove only those.

Cleanup (`Testbed.close`, run by the `testbed` fixture's finalizer, by `with`, and at exit):
every daemon the test bed started gets SIGTERM (then SIGKILL), then every process still inside
each namespace (`ip netns pids`) gets SIGKILL, then the namespaces are deleted (which deletes
their veths and the peers of those veths, also in the root namespace), then the run directory is
copied to the test's directory (logs, configs, pcaps; not sockets) and removed.

Namespace defaults: `lo` up, IPv6 duplicate address detection off (`accept_dad=0`, so link-local
addresses are usable at once, which ospf6d and BGP over IPv6 need), forwarding off unless asked.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ipaddress
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, TypeVar

PREFIX = "lrt-"
_NAME_RE = re.compile(r"^lrt-(\d+)-(\d+)(?:-[A-Za-z0-9_.]+)?$")
_DIR_RE = re.compile(r"^lrt-(\d+)-")
_counter = itertools.count(1)
CLONE_NEWNET = 0x40000000
T = TypeVar("T")


# -- waiting ---------------------------------------------------------------------------------


def wait_until(
    probe: Callable[[], T],
    timeout: float,
    *,
    what: str = "condition",
    interval: float = 0.1,
    diagnostics: Callable[[], str] | None = None,
) -> T:
    """Calls `probe` until it returns something true, and returns that. After `timeout` s raises
    TimeoutError with `what`, the last value (or exception) seen and `diagnostics()`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = probe()
            if last:
                return last
        except (subprocess.SubprocessError, OSError, ValueError, KeyError) as e:
            last = e
        if time.monotonic() >= deadline:
            diag = ""
            if diagnostics is not None:
                with contextlib.suppress(Exception):
                    diag = "\n" + diagnostics()
            raise TimeoutError(
                f"{what}: not reached within {timeout} s; last: {_short(last)}{diag}")
        time.sleep(interval)


def _short(value: Any, limit: int = 2000) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def _run(argv: Sequence[str], *, check: bool = True, timeout: float = 30.0,
         input: str | None = None) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, input=input)
    if check and r.returncode != 0:
        raise subprocess.CalledProcessError(r.returncode, list(argv), r.stdout, r.stderr)
    return r


def _tail(path: Path, limit: int = 6000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-limit:].decode(errors="replace")


# -- processes -------------------------------------------------------------------------------


class Process:
    """A process the test bed started (usually inside a namespace), with its output in `log`."""

    def __init__(self, name: str, argv: list[str], log: Path | None, popen: subprocess.Popen):
        self.name = name
        self.argv = argv
        self.log = log
        self.popen = popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def send_signal(self, sig: int, *, group: bool = False) -> None:
        """Sends `sig` to the process, or with `group` to its whole process group (it leads
        one: started with start_new_session), as a terminal's Ctrl-C does."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if group and self.popen.poll() is None:
                os.killpg(self.popen.pid, sig)
            else:
                self.popen.send_signal(sig)

    def stop(self, timeout: float = 5.0, sig: int = signal.SIGTERM,
             group: bool = False) -> int | None:
        """`sig` (SIGTERM), then SIGKILL after `timeout` s, to the process (or with `group` its
        process group); returns the exit status. Idempotent."""
        if self.popen.poll() is None:
            self.send_signal(sig, group=group)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.send_signal(signal.SIGKILL, group=group)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.popen.wait(timeout=5)
        return self.popen.poll()

    def output(self, limit: int = 6000) -> str:
        return _tail(self.log, limit) if self.log else ""

    def __repr__(self) -> str:
        return f"Process({self.name!r}, pid={self.pid}, running={self.running})"


def _pid_alive(pid: int) -> bool:
    """True if `pid` is a live process (a zombie, killed but not yet reaped, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:
        return True
    # "pid (comm) S ...": the state follows the last ')' (comm may contain anything).
    return stat[stat.rfind(")") + 2:][:1] not in ("Z", "X")


# -- namespaces ------------------------------------------------------------------------------

_libc: Any = None


def _setns(fd: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


class Netns:
    """One network namespace. Made by `Testbed.netns`; usable on its own with `create()` and
    `delete()`."""

    def __init__(self, name: str, label: str = "") -> None:
        self.name = name
        self.label = label or name
        self.processes: list[Process] = []
        self.created = False

    @property
    def path(self) -> str:
        return f"/run/netns/{self.name}"

    def __repr__(self) -> str:
        return f"Netns({self.name!r})"

    def __str__(self) -> str:
        return self.name

    # lifecycle

    def create(self, *, forwarding: bool = False) -> Netns:
        _run(["ip", "netns", "add", self.name])
        self.created = True
        _run(["ip", "-n", self.name, "link", "set", "lo", "up"])
        sysctls = {
            "net.ipv6.conf.all.accept_dad": 0,
            "net.ipv6.conf.default.accept_dad": 0,
            "net.ipv6.conf.all.keep_addr_on_down": 1,
        }
        self.sysctl(sysctls)
        if forwarding:
            self.set_forwarding(True)
        return self

    def delete(self, timeout: float = 5.0) -> None:
        """Stops this namespace's processes (ours gracefully, then SIGKILL for all) and deletes
        it. Idempotent; never raises for a namespace that is already gone."""
        for p in reversed(self.processes):
            with contextlib.suppress(Exception):
                p.stop(timeout=timeout)
        kill_netns_processes(self.name)
        if self.created or self.name in list_netns():
            _run(["ip", "netns", "del", self.name], check=False)
        self.created = False

    # running things

    def exec_argv(self, argv: Sequence[str] | str, *, nsenter: bool = False) -> list[str]:
        """The argv that runs `argv` in this namespace: `ip netns exec NAME ...`, or with
        `nsenter=True` `nsenter --net=/run/netns/NAME ...` (which keeps /sys/fs/bpf and the
        rest of the root namespace's mounts visible, as XDP loaders need; see PEERS.md)."""
        if isinstance(argv, str):
            argv = ["sh", "-c", argv]
        if nsenter:
            return ["nsenter", f"--net={self.path}", *argv]
        return ["ip", "netns", "exec", self.name, *argv]

    def run(self, argv: Sequence[str] | str, *, check: bool = True, timeout: float = 30.0,
            nsenter: bool = False, input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Runs a command in the namespace and waits; a str is run by `sh -c`. Raises
        CalledProcessError (with its output) on a non-zero exit when `check`."""
        return _run(self.exec_argv(argv, nsenter=nsenter), check=check, timeout=timeout,
                    input=input)

    def popen(self, argv: Sequence[str] | str, *, log: Path | None = None, name: str = "",
              nsenter: bool = False, stdin: Any = subprocess.DEVNULL,
              env: dict[str, str] | None = None) -> Process:
        """Starts a command in the namespace (stdout and stderr to `log`, appended), in its own
        session; it is stopped when the namespace is deleted."""
        full = self.exec_argv(argv, nsenter=nsenter)
        out: Any = subprocess.DEVNULL
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            out = open(log, "ab")
        try:
            popen = subprocess.Popen(full, stdin=stdin, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True, env=env)
        finally:
            if log is not None:
                out.close()
        proc = Process(name or Path(full[4 if not nsenter else 2]).name, full, log, popen)
        self.processes.append(proc)
        return proc

    def ip(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`ip -n NAME args...` (needs no exec into the namespace)."""
        return _run(["ip", "-n", self.name, *args], check=check)

    def ip_json(self, *args: str) -> Any:
        out = _run(["ip", "-n", self.name, "-j", *args]).stdout.strip()
        return json.loads(out) if out else []

    def sysctl(self, values: dict[str, Any]) -> None:
        """Sets sysctls inside the namespace (net.* ones are per namespace; note that
        net.core.rmem_max/wmem_max are read-only in a namespace: set them in the root one)."""
        if values:
            self.run(["sysctl", "-q", "-w", *(f"{k}={v}" for k, v in values.items())])

    def set_forwarding(self, on: bool = True) -> None:
        v = 1 if on else 0
        self.sysctl({"net.ipv4.ip_forward": v, "net.ipv6.conf.all.forwarding": v})

    def addr(self, ifname: str, *cidrs: str) -> None:
        """Adds addresses to an interface (IPv6 ones with `nodad`) and sets it up."""
        for cidr in cidrs:
            iface = ipaddress.ip_interface(cidr)
            extra = ["nodad"] if iface.version == 6 else []
            self.ip("addr", "add", cidr, "dev", ifname, *extra)
        self.ip("link", "set", ifname, "up")

    def up(self, *ifnames: str) -> None:
        for ifname in ifnames:
            self.ip("link", "set", ifname, "up")

    def route(self, *args: str) -> None:
        """`ip route add ...` in the namespace, e.g. route("198.51.100.0/24", "via", "192.0.2.1");
        an IPv6 destination selects `ip -6`."""
        fam = ["-6"] if args and ":" in args[0] else []
        self.ip(*fam, "route", "add", *args)

    def routes(self, family: int = 4, *, proto: str | None = None,
               table: str = "main") -> list[dict]:
        """The kernel's routes in this namespace (`ip -j route show`), optionally of one
        protocol ("bgp", "ospf", "static", "kernel", ...)."""
        args = [f"-{family}", "route", "show", "table", table]
        if proto:
            args += ["proto", proto]
        return self.ip_json(*args)

    def route_prefixes(self, family: int = 4, *, proto: str | None = None,
                       table: str = "main") -> set[str]:
        """The destinations of `routes()` as normalised prefixes ("198.18.0.0/26")."""
        out = set()
        for r in self.routes(family, proto=proto, table=table):
            dst = r.get("dst", "")
            if dst == "default":
                dst = "0.0.0.0/0" if family == 4 else "::/0"
            out.add(str(ipaddress.ip_network(dst, strict=False)))
        return out

    def ping(self, dst: str, *, count: int = 1, timeout: float = 2.0) -> bool:
        """True if `dst` answers `count` pings (IPv4 or IPv6 by the address) within `timeout`."""
        r = self.run(["ping", "-n", "-q", "-c", str(count), "-i", "0.2", "-W",
                      str(max(1, int(timeout))), "-w", str(max(1, int(timeout) + 1)), dst],
                     check=False, timeout=timeout + 10)
        return r.returncode == 0

    def pids(self) -> list[int]:
        return netns_pids(self.name)

    def socket(self, family: int = socket.AF_INET, type: int = socket.SOCK_STREAM,
               proto: int = 0) -> socket.socket:
        """A socket of this namespace, made from this process: a short-lived thread enters the
        namespace (setns), creates the socket and ends; the socket keeps the namespace."""
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    _setns(fd)
                finally:
                    os.close(fd)
                box["sock"] = socket.socket(family, type, proto)
            except BaseException as e:  # handed to the caller
                box["err"] = e

        t = threading.Thread(target=work, name=f"setns-{self.name}")
        t.start()
        t.join()
        if "err" in box:
            raise box["err"]
        return box["sock"]


def list_netns() -> list[str]:
    r = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def netns_pids(name: str) -> list[int]:
    r = _run(["ip", "netns", "pids", name], check=False)
    return [int(x) for x in r.stdout.split() if x.isdigit()]


def kill_netns_processes(name: str, timeout: float = 5.0) -> None:
    """SIGKILLs every process inside namespace `name` until none is left (or `timeout`)."""
    deadline = time.monotonic() + timeout
    while True:
        pids = [p for p in netns_pids(name) if p != os.getpid()]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() >= deadline:
            return
        time.sleep(0.05)


def sweep_stale(*, tmpdir: str | None = None) -> list[str]:
    """Removes what earlier runs left behind: `lrt-<pid>-*` namespaces (their processes killed)
    and /tmp/lrt-<pid>-* run directories whose <pid> is no longer alive. Namespaces of live
    processes (a parallel run, another engineer's tests) are left alone. Returns the names
    removed."""
    removed = []
    for name in list_netns():
        m = _NAME_RE.match(name)
        if m and not _pid_alive(int(m.group(1))):
            kill_netns_processes(name)
            _run(["ip", "netns", "del", name], check=False)
            removed.append(name)
    base = Path(tmpdir or tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for d in base.iterdir():
            m = _DIR_RE.match(d.name)
            if m and d.is_dir() and not _pid_alive(int(m.group(1))):
                shutil.rmtree(d, ignore_errors=True)
                removed.append(str(d))
    return removed



# -- watching the kernel's routes ------------------------------------------------------------

_ROUTE_TYPES = {"unicast", "unreachable", "blackhole", "prohibit", "local", "broadcast",
                "multicast", "anycast", "throw", "nat"}


def parse_route_event(line: str) -> tuple[bool, str] | None:
    """One line of `ip [-ts] monitor route` as (deleted, prefix), or None if it is not a
    route ("198.18.0.0/26 nhid 15 via ..." -> (False, "198.18.0.0/26"); "Deleted blackhole
    2001:db8::/48 ..." -> (True, "2001:db8::/48"); a host address gets its /32 or /128)."""
    words = line.split()
    if words and words[0].startswith("[") and words[0].endswith("]"):
        words = words[1:]  # -ts timestamp
    deleted = bool(words) and words[0] == "Deleted"
    if deleted:
        words = words[1:]
    if words and words[0] in _ROUTE_TYPES:
        words = words[1:]
    if not words:
        return None
    dst = words[0]
    if dst == "default":
        dst = "::/0" if any(":" in w for w in words[1:]) else "0.0.0.0/0"
    try:
        return deleted, str(ipaddress.ip_network(dst, strict=False))
    except ValueError:
        return None


class RouteMonitor:
    """`ip -ts monitor route` in a namespace, for asserting that routes were never removed
    (e.g. across a graceful restart). Start it, do the thing, stop it, read `events()`."""

    def __init__(self, ns: Netns, log: Path) -> None:
        self.ns, self.log = ns, log
        self.proc: Process | None = None

    def start(self) -> RouteMonitor:
        self.proc = self.ns.popen(["ip", "-ts", "monitor", "route"], log=self.log,
                                  name="ip-monitor")
        pid = self.proc.pid

        def subscribed() -> bool:
            with contextlib.suppress(OSError):
                return any(os.readlink(f).startswith("socket:")
                           for f in Path(f"/proc/{pid}/fd").iterdir())
            return False

        wait_until(subscribed, 5.0, interval=0.01, what="ip monitor subscribed")
        time.sleep(0.1)  # from socket() to the netlink subscription
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    def events(self) -> list[tuple[bool, str]]:
        """(deleted, prefix) for every route event so far, in order."""
        out = []
        for line in _tail(self.log, 1 << 30).splitlines():
            ev = parse_route_event(line)
            if ev is not None:
                out.append(ev)
        return out

    def removals(self, prefixes: Iterable[str] | None = None) -> list[str]:
        """Prefixes (of `prefixes`, or all) that were deleted and not put back by the very next
        event. IPv6 reports an atomic route replace as "Deleted old" immediately followed by
        the new route, which is not a removal."""
        want = set(prefixes) if prefixes is not None else None
        evs = self.events()
        out = []
        for i, (deleted, prefix) in enumerate(evs):
            if not deleted or (want is not None and prefix not in want):
                continue
            nxt = evs[i + 1] if i + 1 < len(evs) else None
            if nxt != (False, prefix):
                out.append(prefix)
        return out

    def added(self, prefixes: Iterable[str] | None = None) -> set[str]:
        """Prefixes (of `prefixes`, or all) that were added or replaced."""
        want = set(prefixes) if prefixes is not None else None
        return {p for d, p in self.events() if not d and (want is None or p in want)}

# -- the test bed ----------------------------------------------------------------------------


class Veth:
    """A veth pair: `a` end in namespace `ns_a`, `b` end in `ns_b` (None: the root namespace,
    for a device under test run there)."""

    def __init__(self, ns_a: Netns, a: str, ns_b: Netns | None, b: str) -> None:
        self.ns_a, self.a, self.ns_b, self.b = ns_a, a, ns_b, b

    def __repr__(self) -> str:
        return f"Veth({self.ns_a}:{self.a} <-> {self.ns_b or 'root'}:{self.b})"


class Testbed:
    """Owns the namespaces, veths, daemons and captures of one test, and removes them all in
    `close()`. `workdir` (the test's tmp_path) receives a copy of the run directory at close."""

    __test__ = False  # not a pytest test class, despite its name

    def __init__(self, workdir: Path | None = None) -> None:
        self.workdir = Path(workdir) if workdir else None
        # Under /tmp, not tmp_path: FRR drops to user frr, which cannot enter pytest's 0700
        # directories. The name carries our pid so sweep_stale() can remove it after a crash.
        self.root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
        self.root.chmod(0o755)
        self.namespaces: list[Netns] = []
        self.veths: list[Veth] = []
        self.services: list[Any] = []
        self.closed = False
        atexit.register(self.close)

    def __enter__(self) -> Testbed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # making things

    def netns(self, label: str = "", *, forwarding: bool = False) -> Netns:
        """A new namespace `lrt-<pid>-<n>[-label]`, created now and deleted at close. The label
        (letters, digits, `_` and `.`) also names its daemons' run directories."""
        if not re.fullmatch(r"[A-Za-z0-9_.]*", label):
            raise ValueError(f"namespace label {label!r}: only letters, digits, _ and .")
        suffix = f"-{label}" if label else ""
        ns = Netns(f"{PREFIX}{os.getpid()}-{next(_counter)}{suffix}", label)
        self.namespaces.append(ns)
        ns.create(forwarding=forwarding)
        return ns

    def hosts_around(self, n: int) -> tuple[Netns, list[Netns]]:
        """A `dut` namespace and hosts h1..hN, host i's eth0 cabled to the DUT's d(i-1) (up,
        IPv6 off on the DUT's side: the device under test sets its own addresses)."""
        dut = self.netns("dut")
        hosts = [self.netns(f"h{i + 1}") for i in range(n)]
        for i, h in enumerate(hosts):
            self.veth(h, "eth0", dut, f"d{i}")
            dut.sysctl({f"net.ipv6.conf.d{i}.disable_ipv6": 1})
            dut.up(f"d{i}")
        dut.up("lo")
        return dut, hosts

    def veth(self, ns_a: Netns, a: str, ns_b: Netns | None, b: str, *, queues: int = 2,
             txqueues: int | None = None, rxqueues: int | None = None,
             up: bool = True) -> Veth:
        """A veth pair between `ns_a`:`a` and `ns_b`:`b` (`ns_b=None`: that end stays in the
        root namespace, for a device under test), with `queues` tx and rx queues each (2 by
        default: single-queue veths collapse XDP redirect with two senders, PEERS.md)."""
        for n in (a, b):
            if len(n) > 15:
                raise ValueError(f"interface name {n!r} is longer than 15 characters")
        tx = str(txqueues or queues)
        rx = str(rxqueues or queues)
        peer_ns = ns_b.name if ns_b is not None else str(os.getpid())
        _run(["ip", "-n", ns_a.name, "link", "add", a, "numtxqueues", tx, "numrxqueues", rx,
              "type", "veth", "peer", "name", b, "netns", peer_ns,
              "numtxqueues", tx, "numrxqueues", rx])
        veth = Veth(ns_a, a, ns_b, b)
        self.veths.append(veth)
        if up:
            ns_a.up(a)
            if ns_b is not None:
                ns_b.up(b)
            else:
                _run(["ip", "link", "set", b, "up"])
        return veth

    def dir(self, name: str, *, owner: str | None = None, mode: int = 0o755) -> Path:
        """A fresh directory under the run directory (owned by `owner` if given); `name-2`,
        `name-3`, ... if `name` is taken."""
        d = self.root / name
        n = 1
        while d.exists():
            n += 1
            d = self.root / f"{name}-{n}"
        d.mkdir(parents=True)
        d.chmod(mode)
        if owner:
            shutil.chown(d, owner, owner)
        return d

    def add(self, service: T) -> T:
        """Registers something with stop() (and optionally diagnostics()) to stop at close,
        before the namespaces go."""
        self.services.append(service)
        return service

    def frr(self, ns: Netns, configs: dict[str, str], **kwargs: Any) -> Any:
        """Starts an FRR instance in `ns` (see frr.Frr) and returns it."""
        from .frr import Frr

        frr = self.add(Frr(ns, self.dir(f"frr-{ns.label}", owner="frr"), configs, **kwargs))
        frr.start()
        return frr

    def gobgp(self, ns: Netns, config: str, **kwargs: Any) -> Any:
        """Starts gobgpd in `ns` (see gobgp.Gobgp) and returns it."""
        from .gobgp import Gobgp

        gb = self.add(Gobgp(ns, self.dir(f"gobgp-{ns.label}"), config, **kwargs))
        gb.start()
        return gb

    def bird(self, ns: Netns, config: str, **kwargs: Any) -> Any:
        """Starts a BIRD 2 instance in `ns` (see bird.Bird) and returns it."""
        from .bird import Bird

        bird = self.add(Bird(ns, self.dir(f"bird-{ns.label}"), config, **kwargs))
        bird.start()
        return bird

    def capture(self, ns: Netns | None, iface: str, name: str | None = None,
                **kwargs: Any) -> Any:
        """Starts a tshark capture on `iface` in `ns` (see capture.Capture) and returns it."""
        from .capture import Capture

        pcap = self.root / "pcap" / (name or f"{ns.label if ns else 'root'}-{iface}.pcap")
        cap = self.add(Capture(ns, iface, pcap, **kwargs))
        cap.start()
        return cap

    def route_monitor(self, ns: Netns, name: str = "") -> RouteMonitor:
        """Starts `ip monitor route` in `ns` (see RouteMonitor); stopped at close."""
        log = self.root / f"route-monitor-{ns.label}{('-' + name) if name else ''}.log"
        return self.add(RouteMonitor(ns, log)).start()

    # diagnostics and cleanup

    def diagnostics(self) -> str:
        parts = []
        for s in self.services:
            diag = getattr(s, "diagnostics", None)
            if diag is not None:
                with contextlib.suppress(Exception):
                    parts.append(diag())
        return "\n".join(p for p in parts if p)

    def close(self) -> None:
        """Stops everything and deletes every namespace; safe to call more than once. Errors
        along the way do not stop the rest of the cleanup; the first is raised at the end."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
        errors: list[BaseException] = []
        for s in reversed(self.services):
            try:
                s.stop()
            except BaseException as e:  # keep cleaning
                errors.append(e)
        for ns in reversed(self.namespaces):
            try:
                ns.delete()
            except BaseException as e:
                errors.append(e)
        for v in self.veths:  # a root-namespace end outlives nothing, but check
            if v.ns_b is None:
                _run(["ip", "link", "del", v.b], check=False)
        if self.workdir is not None:
            with contextlib.suppress(Exception):
                _copy_regular_files(self.root, self.workdir / "testbed")
        shutil.rmtree(self.root, ignore_errors=True)
        if errors:
            raise errors[0]


def _copy_regular_files(src: Path, dst: Path) -> None:
    for path in src.rglob("*"):
        if path.is_file() and not path.is_symlink():
            target = dst / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                shutil.copyfile(path, target)


def all_namespaces_gone(names: Iterable[str]) -> bool:
    present = set(list_netns())
    return not any(n in present for n in names)
