"""tshark captures inside a namespace, and reading pcaps back as fields for assertions.

    cap = tb.capture(b, "b0", bpf="icmp or icmp6")     # started, and capturing when it returns
    ...traffic...
    cap.stop()                                         # SIGINT: the pcap is complete after this
    rows = cap.fields(["ip.src", "ip.dst"], "icmp.type == 8")
    assert ("192.0.2.1", "192.0.2.2") in {tuple(r) for r in rows}

`ip netns exec NS tshark -i IF -w FILE -F pcap` as PEERS.md says. start() returns once tshark
says "Capturing on 'IF'" (dumpcap has the interface open), so nothing sent after it is missed.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Sequence

from .install import require_tools
from .netns import Netns, Process, _run, _tail, wait_until


def read_fields(pcap: Path | str, fields: Sequence[str], display_filter: str | None = None,
                *, tshark: str = "tshark", decode_as: Sequence[str] = ()) -> list[list[str]]:
    """Reads `pcap` with `tshark -T fields`: one list of strings per packet (matching
    `display_filter`), one string per field ("" when absent; several occurrences joined by
    ","). `decode_as` entries are passed as `-d` (e.g. "udp.port==2055,cflow")."""
    argv = [tshark, "-n", "-r", str(pcap), "-T", "fields", "-E", "separator=\t",
            "-E", "occurrence=a", "-E", "aggregator=,"]
    for d in decode_as:
        argv += ["-d", d]
    if display_filter:
        argv += ["-Y", display_filter]
    for f in fields:
        argv += ["-e", f]
    r = _run(argv, timeout=120)
    return [line.split("\t") for line in r.stdout.splitlines()]


class Capture:
    """tshark on `iface` in `ns` (None: the root namespace) writing `pcap` (pcap format)."""

    def __init__(self, ns: Netns | None, iface: str, pcap: Path, *, bpf: str | None = None,
                 snaplen: int | None = None, start_timeout: float = 15.0,
                 settle: float = 0.6) -> None:
        self.ns, self.iface, self.pcap = ns, iface, Path(pcap)
        self.bpf, self.snaplen = bpf, snaplen
        self.start_timeout = start_timeout
        self.settle = settle
        self.log = self.pcap.with_suffix(".tshark.log")
        self.proc: Process | None = None
        self.popen: subprocess.Popen | None = None
        self.tshark = "tshark"
        self.packets: int | None = None

    def start(self) -> Capture:
        self.tshark = require_tools("tshark")["tshark"]
        self.pcap.parent.mkdir(parents=True, exist_ok=True)
        argv = [self.tshark, "-n", "-i", self.iface, "-w", str(self.pcap), "-F", "pcap"]
        if self.bpf:
            argv += ["-f", self.bpf]
        if self.snaplen:
            argv += ["-s", str(self.snaplen)]
        if self.ns is not None:
            self.proc = self.ns.popen(argv, log=self.log, name="tshark")
        else:
            with open(self.log, "ab") as out:
                popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
            self.proc = Process("tshark", argv, self.log, popen)
        wait_until(self._capturing, self.start_timeout, interval=0.05,
                   what=f"tshark capturing on {self.iface} in {self.ns or 'root'}",
                   diagnostics=self.diagnostics)
        return self

    def _capturing(self) -> bool:
        assert self.proc is not None
        if not self.proc.running:
            raise RuntimeError(f"tshark exited at start:\n{self.diagnostics()}")
        return "Capturing on" in _tail(self.log)

    def stop(self, timeout: float = 10.0, settle: float | None = None) -> int | None:
        """Stops the capture cleanly (SIGINT, as Ctrl-C; SIGKILL only after `timeout` s) and
        returns the packet count tshark reported. Idempotent.

        Waits `settle` s (default `self.settle`, 0.6) first: libpcap's TPACKET_V3 ring hands
        packets to dumpcap only when a block fills or its timeout (dumpcap's 250 ms) expires,
        and dumpcap does not drain the ring when interrupted, so the last ~250 ms of traffic
        were missing from the pcap without the wait."""
        if self.proc is not None:
            time.sleep(self.settle if settle is None else settle)
            # To the process group, as Ctrl-C: tshark and its dumpcap both stop, and dumpcap
            # writes what it still holds. SIGINT to tshark alone lost packets.
            self.proc.stop(timeout=timeout, sig=signal.SIGINT, group=True)
            self.proc = None
            m = re.findall(r"(\d+) packets? captured", _tail(self.log))
            self.packets = int(m[-1]) if m else None
        return self.packets

    def fields(self, fields: Sequence[str], display_filter: str | None = None,
               **kwargs: object) -> list[list[str]]:
        """read_fields on this capture's pcap (stop() it first)."""
        if self.proc is not None:
            raise RuntimeError("stop() the capture before reading it")
        return read_fields(self.pcap, fields, display_filter, tshark=self.tshark,
                           **kwargs)  # type: ignore[arg-type]

    def diagnostics(self) -> str:
        return f"=== tshark on {self.iface} in {self.ns or 'root'}:\n{_tail(self.log, 2000)}"
