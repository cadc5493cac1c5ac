"""A private rsyslogd for a system test: it receives syslog over UDP on 127.0.0.1 and writes
every message it got as one JSON object per line, with the fields of RFC 5424 as rsyslog's
RFC 5424 parser decoded them.

    from rsyslog import rsyslog_server

    def test_something(tmp_path):
        with rsyslog_server(tmp_path) as srv:
            ...  # make the thing under test send to ("127.0.0.1", srv.port)
            recs = srv.wait_for(lambda recs: any(r["msgid"] == "LINK_DOWN" for r in recs))

Each record is a dict with the keys "pri", "facility", "severity" (ints), "timestamp",
"hostname", "app-name", "procid", "msgid", "structured-data", "msg" (strings, as rsyslog's
properties of those names give them), "protocol-version" ("1" when the RFC 5424 parser took the
datagram) and "rawmsg" (the datagram as received). rsyslog spells a
NILVALUE field as "-", keeps the structured data as its raw text (escapes and all:
`parse_structured_data` decodes it), and gives the timestamp back as it was sent (RFC 3339).
Control characters are kept as received (`parser.escapeControlCharactersOnReceive="off"`; by
default rsyslog would turn a newline into the four characters `#012`, in rawmsg too).

The daemon is isolated from the machine's own syslog: the config loads only imudp (no imuxsock,
no imklog, so /dev/log and the kernel log are left alone), processes rsyslog's own messages
itself instead of sending them to /dev/log (`processInternalMessages="on"`; without it rsyslogd
connects to /dev/log to report its start and stop) and writes them to `internal.log`, keeps its
work directory, pid file and outputs under the test's directory, runs in the foreground (`-n`)
and is always stopped (SIGTERM, then SIGKILL) when the test ends.

rsyslogd is installed from Debian's packages when missing, if running as root; otherwise the
calling test is skipped (the same policy as tshark in conftest.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

HOST = "127.0.0.1"

# The JSON fields written per message, as (output name, rsyslog property, extra parameters).
_FIELDS: list[tuple[str, str, str]] = [
    ("pri", "pri", ' datatype="number"'),
    ("facility", "syslogfacility", ' datatype="number"'),
    ("severity", "syslogseverity", ' datatype="number"'),
    ("timestamp", "timereported", ' dateFormat="rfc3339"'),
    ("hostname", "hostname", ""),
    ("app-name", "app-name", ""),
    ("procid", "procid", ""),
    ("msgid", "msgid", ""),
    ("structured-data", "structured-data", ""),
    ("msg", "msg", ""),
    ("protocol-version", "protocol-version", ""),
    ("rawmsg", "rawmsg", ""),
]


def _find_rsyslogd() -> str | None:
    found = shutil.which("rsyslogd")
    if found:
        return found
    # /usr/sbin is not on every user's PATH.
    for p in ("/usr/sbin/rsyslogd", "/sbin/rsyslogd"):
        if os.access(p, os.X_OK):
            return p
    return None


def ensure_rsyslogd() -> str:
    """Returns the path of rsyslogd, installing it from Debian's packages if missing.

    Installing needs root; without root and without rsyslogd, the calling test is skipped.
    Installing the package does not leave a system rsyslog running here (no init system starts
    it in a container), and the private daemon does not depend on one either way.
    """
    found = _find_rsyslogd()
    if found:
        return found
    if os.geteuid() != 0:
        pytest.skip(
            "rsyslogd is not installed and this user is not root, so it cannot be installed "
            "(apt-get install rsyslog)"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "rsyslog"]):
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
        if r.returncode != 0:
            pytest.fail(
                f"installing rsyslog failed at {' '.join(cmd)!r} (exit {r.returncode}):\n"
                f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}",
                pytrace=False,
            )
    found = _find_rsyslogd()
    if not found:
        pytest.fail("apt-get install rsyslog succeeded but rsyslogd is not found", pytrace=False)
    return found


def free_udp_port(host: str = HOST) -> int:
    """A UDP port on `host` that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _q(s: str | Path) -> str:
    """A string literal of rsyslog's RainerScript."""
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_config(
    workdir: Path, port: int, out_file: Path, internal_file: Path, *, strict: bool = True
) -> str:
    """The rsyslog config of a private daemon (see the module's documentation).

    `strict`: only the RFC 5424 parser is tried, and a datagram it does not take is dropped
    (rsyslog says so in internal.log) instead of being read as RFC 3164 with made-up fields.
    rsyslog's RFC 5424 parser is lenient, though: `<190>1 bad` passes it (with an empty
    app-name and msg "bad"), so a test should check the fields, not only that a record came.
    """
    write = f'action(type="omfile" file={_q(out_file)} template="linerate_jsonl")'
    if strict:
        parsers = '"rsyslog.rfc5424"'
        # rsyslog 8.2302 logs "message is being discarded" when no parser takes a datagram, but
        # still passes it on, unparsed (protocol-version "0", msg = NUL + the raw text less its
        # last character): keep only what the RFC 5424 parser took.
        write = 'if $protocol-version == "1" then {\n    ' + write + "\n  }"
    else:
        parsers = '"rsyslog.rfc5424", "rsyslog.rfc3164"'
    props = "\n".join(
        f'  property(outname="{out}" name="{prop}" format="jsonf"{extra})'
        for out, prop, extra in _FIELDS
    )
    return f"""\
# A private rsyslogd for one test, written by tests/system/rsyslog.py.
global(
  workDirectory={_q(workdir)}
  processInternalMessages="on"
  net.enableDNS="off"
  parser.escapeControlCharactersOnReceive="off"
)
module(load="imudp")

template(name="linerate_jsonl" type="list" option.jsonf="on") {{
{props}
}}

ruleset(name="linerate_udp" parser=[{parsers}]) {{
  {write}
}}

input(type="imudp" address="{HOST}" port="{port}" ruleset="linerate_udp")

# The default ruleset gets only rsyslogd's own messages.
action(type="omfile" file={_q(internal_file)})
"""


def _udp_socket_inode(host: str, port: int) -> int | None:
    """The inode of the socket bound to host:port (IPv4 UDP), from /proc/net/udp."""
    want = f"{socket.htonl(int.from_bytes(socket.inet_aton(host), 'big')):08X}:{port:04X}"
    try:
        lines = Path("/proc/net/udp").read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        f = line.split()
        if len(f) > 9 and f[1] == want:
            return int(f[9])
    return None


def _owns_socket(pid: int, inode: int) -> bool:
    target = f"socket:[{inode}]"
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        for fd in fd_dir.iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd) == target:
                    return True
    except OSError:
        pass
    return False


_SD_ELEMENT = re.compile(r'\[([^ \]=]+)((?:\s+[^ =\]"]+="(?:[^"\\]|\\.)*")*)\s*\]')
_SD_PARAM = re.compile(r'([^ =\]"]+)="((?:[^"\\]|\\.)*)"')


def parse_structured_data(sd: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """Decodes RFC 5424 STRUCTURED-DATA: a list of (SD-ID, [(name, value), ...]) in order, with
    the `\\"`, `\\\\` and `\\]` escapes undone (a backslash before anything else stays, as the
    RFC says). "-" gives an empty list; text that is not structured data raises ValueError."""
    if sd == "-":
        return []
    out: list[tuple[str, list[tuple[str, str]]]] = []
    pos = 0
    while pos < len(sd):
        m = _SD_ELEMENT.match(sd, pos)
        if not m:
            raise ValueError(f"not RFC 5424 structured data at offset {pos}: {sd!r}")
        params = [
            (name, re.sub(r'\\(["\\\]])', r"\1", value))
            for name, value in _SD_PARAM.findall(m.group(2))
        ]
        out.append((m.group(1), params))
        pos = m.end()
    return out


class Rsyslog:
    """A private rsyslogd listening on 127.0.0.1:`port` (UDP). Use it as a context manager, or
    call `start()` and `stop()`."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        strict: bool = True,
        start_timeout: float = 10.0,
        rsyslogd: str | None = None,
    ) -> None:
        self.dir = Path(tmp_path) / "rsyslog"
        self.strict = strict
        self.start_timeout = start_timeout
        self.rsyslogd = rsyslogd
        self.conf_path = self.dir / "rsyslog.conf"
        self.pid_path = self.dir / "rsyslogd.pid"
        self.out_path = self.dir / "messages.jsonl"
        self.internal_path = self.dir / "internal.log"
        self.console_path = self.dir / "console.log"
        self.host = HOST
        self.port: int = 0
        self.proc: subprocess.Popen[bytes] | None = None

    # -- running --

    def start(self) -> Rsyslog:
        if self.proc is not None:
            raise RuntimeError("rsyslogd already started")
        if self.rsyslogd is None:
            self.rsyslogd = ensure_rsyslogd()
        self.dir.mkdir(parents=True, exist_ok=True)
        last_error = ""
        for _attempt in range(5):
            self.port = free_udp_port()
            self.conf_path.write_text(
                render_config(
                    self.dir, self.port, self.out_path, self.internal_path, strict=self.strict
                )
            )
            check = subprocess.run(
                [self.rsyslogd, "-N1", "-f", str(self.conf_path)],
                capture_output=True,
                text=True,
                timeout=60,
            )
            if check.returncode != 0:
                raise RuntimeError(
                    f"rsyslogd rejected its config {self.conf_path} "
                    f"(exit {check.returncode}):\n{check.stdout}{check.stderr}"
                )
            self.pid_path.unlink(missing_ok=True)
            with open(self.console_path, "ab") as console:
                self.proc = subprocess.Popen(
                    [self.rsyslogd, "-n", "-f", str(self.conf_path), "-i", str(self.pid_path)],
                    stdin=subprocess.DEVNULL,
                    stdout=console,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            if self._wait_listening():
                return self
            last_error = self.diagnostics()
            self.stop()
            # Another process may have taken the port between picking and binding: try again.
        raise RuntimeError(f"rsyslogd did not start listening on UDP:\n{last_error}")

    def _wait_listening(self) -> bool:
        assert self.proc is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            # rsyslogd may bind its input before it writes its pid file: ready means both.
            inode = _udp_socket_inode(self.host, self.port)
            if (
                inode is not None
                and _owns_socket(self.proc.pid, inode)
                and self._pid_file_written()
            ):
                return True
            time.sleep(0.02)
        return False

    def _pid_file_written(self) -> bool:
        assert self.proc is not None
        try:
            return int(self.pid_path.read_text().strip() or "0") == self.proc.pid
        except (OSError, ValueError):
            return False

    def stop(self) -> None:
        """Stops the daemon: SIGTERM, then SIGKILL after 5 s. Safe to call more than once."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> Rsyslog:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- talking to it --

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    def send(self, datagram: bytes | str) -> None:
        """Sends one datagram to the daemon (a str is encoded as UTF-8)."""
        data = datagram.encode() if isinstance(datagram, str) else datagram
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(data, self.address)

    def records(self) -> list[dict[str, Any]]:
        """Every message received so far, oldest first (complete lines only)."""
        try:
            text = self.out_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        lines = text.split("\n")[:-1]  # a last line without its newline is still being written
        return [json.loads(line) for line in lines if line.strip()]

    def wait_for(
        self, predicate: Callable[[list[dict[str, Any]]], object], timeout: float = 5.0
    ) -> list[dict[str, Any]]:
        """Waits until `predicate(records)` is true and returns those records; raises
        TimeoutError (with what was received and rsyslogd's own messages) after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            recs = self.records()
            if predicate(recs):
                return recs
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"rsyslog records did not satisfy the predicate within {timeout} s; "
                    f"{len(recs)} received:\n"
                    + "\n".join(json.dumps(r) for r in recs[-20:])
                    + "\n"
                    + self.diagnostics()
                )
            time.sleep(0.02)

    def diagnostics(self) -> str:
        """rsyslogd's own messages and console output, for failure messages."""
        parts = []
        for label, p in (("internal.log", self.internal_path), ("console", self.console_path)):
            with contextlib.suppress(OSError):
                text = p.read_text(errors="replace")
                if text.strip():
                    parts.append(f"--- rsyslogd {label} ---\n{text[-4000:]}")
        return "\n".join(parts)


@contextlib.contextmanager
def rsyslog_server(tmp_path: Path, **kwargs: Any) -> Iterator[Rsyslog]:
    """A started `Rsyslog` for the body of a `with`, always stopped after it."""
    srv = Rsyslog(tmp_path, **kwargs)
    try:
        srv.start()
        yield srv
    finally:
        srv.stop()
