"""A small FPM server in Python, for testing what FRR's zebra sends (dplane_fpm_nl), and the
decoding of just enough of it: the FPM frame header, nlmsghdr, rtmsg and RTA_DST.

    fpm = tb.add(FpmListener(b))          # listens on 127.0.0.1:2620 inside namespace b
    frr = tb.frr(b, {...}, fpm=True)      # zebra connects to it (it is the TCP client)
    fpm.wait_for(lambda f: want <= f.prefixes(), timeout=30)

FPM frame (FRR's fpm/fpm.h): version (1 byte, 1), message type (1 byte, 1 = netlink), total
length (16-bit big endian, including these 4 bytes), then the netlink message(s). zebra 8.4 sends
one netlink message per frame (PEERS.md); the decoder walks every message of a frame anyway.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Callable, Iterator

from .netns import Netns, wait_until

FPM_HEADER = struct.Struct("!BBH")
NLMSGHDR = struct.Struct("=IHHII")
RTMSG = struct.Struct("=BBBBBBBBI")
RTATTR = struct.Struct("=HH")

FPM_VERSION = 1
FPM_MSG_NETLINK = 1
RTM_NEWROUTE, RTM_DELROUTE = 24, 25
RTM_NEWNEXTHOP, RTM_DELNEXTHOP = 104, 105
RTA_DST, RTA_TABLE, RTA_NH_ID = 1, 15, 30
RTPROT_BGP, RTPROT_OSPF = 186, 188


@dataclass(frozen=True)
class NlRoute:
    """One RTM_NEWROUTE / RTM_DELROUTE, decoded as far as tests need."""

    msg_type: int
    prefix: str
    protocol: int
    table: int

    @property
    def is_add(self) -> bool:
        return self.msg_type == RTM_NEWROUTE


def _align4(n: int) -> int:
    return (n + 3) & ~3


def split_frames(buf: bytearray) -> Iterator[tuple[int, int, bytes]]:
    """Takes every complete FPM frame off the front of `buf` and yields (version, type,
    payload). Raises ValueError on a frame length below the header's."""
    while len(buf) >= FPM_HEADER.size:
        version, mtype, length = FPM_HEADER.unpack_from(buf)
        if length < FPM_HEADER.size:
            raise ValueError(f"FPM frame length {length} < {FPM_HEADER.size}")
        if len(buf) < length:
            return
        payload = bytes(buf[FPM_HEADER.size:length])
        del buf[:length]
        yield version, mtype, payload


def netlink_messages(payload: bytes) -> Iterator[tuple[int, bytes]]:
    """(nlmsg_type, message including its header) for each netlink message in `payload`."""
    off = 0
    while off + NLMSGHDR.size <= len(payload):
        length, mtype, _flags, _seq, _pid = NLMSGHDR.unpack_from(payload, off)
        if length < NLMSGHDR.size or off + length > len(payload):
            raise ValueError(f"bad nlmsg_len {length} at {off} of {len(payload)}")
        yield mtype, payload[off:off + length]
        off += _align4(length)


def decode_route(msg: bytes) -> NlRoute:
    """Decodes an RTM_NEWROUTE/RTM_DELROUTE message (with its nlmsghdr): the prefix from rtmsg's
    family and dst_len and the RTA_DST attribute (absent: the default route)."""
    _len, mtype, _f, _s, _p = NLMSGHDR.unpack_from(msg)
    family, dst_len, _src_len, _tos, table, protocol, _scope, _rtype, _flags = \
        RTMSG.unpack_from(msg, NLMSGHDR.size)
    dst = b""
    off = NLMSGHDR.size + RTMSG.size
    while off + RTATTR.size <= len(msg):
        rta_len, rta_type = RTATTR.unpack_from(msg, off)
        if rta_len < RTATTR.size:
            break
        data = msg[off + RTATTR.size:off + rta_len]
        if rta_type == RTA_DST:
            dst = data
        elif rta_type == RTA_TABLE and len(data) >= 4:
            table = struct.unpack("=I", data[:4])[0]
        off += _align4(rta_len)
    if family == socket.AF_INET:
        addr = ipaddress.IPv4Address(dst.ljust(4, b"\0")[:4])
    elif family == socket.AF_INET6:
        addr = ipaddress.IPv6Address(dst.ljust(16, b"\0")[:16])
    else:
        raise ValueError(f"route of address family {family}")
    prefix = str(ipaddress.ip_network(f"{addr}/{dst_len}", strict=False))
    return NlRoute(mtype, prefix, protocol, table)


class FpmListener:
    """Listens for zebra's FPM connection in namespace `ns` and records every frame. Accepts
    again after a disconnect (zebra restarting). Stop with stop() (the test bed does it)."""

    def __init__(self, ns: Netns, host: str = "127.0.0.1", port: int = 2620) -> None:
        self.ns = ns
        self.host, self.port = host, port
        self.lock = threading.Lock()
        self.frames: list[tuple[int, int, bytes]] = []
        self.routes: list[NlRoute] = []
        self.msg_types: dict[int, int] = {}
        self.connections = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self.sock = ns.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.thread = threading.Thread(target=self._serve, name=f"fpm-{ns.name}", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, TimeoutError):
                continue
            except OSError:
                return
            with self.lock:
                self.connections += 1
            try:
                self._read(conn)
            except Exception as e:  # noqa: BLE001 - recorded for the test
                self.errors.append(repr(e))
            finally:
                conn.close()

    def _read(self, conn: socket.socket) -> None:
        conn.settimeout(0.2)
        buf = bytearray()
        while not self._stop.is_set():
            try:
                data = conn.recv(1 << 16)
            except (socket.timeout, TimeoutError):
                continue
            if not data:
                return
            buf += data
            for version, mtype, payload in split_frames(buf):
                routes = []
                types = []
                if version == FPM_VERSION and mtype == FPM_MSG_NETLINK:
                    for nl_type, msg in netlink_messages(payload):
                        types.append(nl_type)
                        if nl_type in (RTM_NEWROUTE, RTM_DELROUTE):
                            routes.append(decode_route(msg))
                with self.lock:
                    self.frames.append((version, mtype, payload))
                    self.routes.extend(routes)
                    for t in types:
                        self.msg_types[t] = self.msg_types.get(t, 0) + 1

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self.sock.close()
        self.thread.join(timeout=5)

    # views

    def frame_kinds(self) -> set[tuple[int, int]]:
        """The (version, type) pairs of every frame received."""
        with self.lock:
            return {(v, t) for v, t, _ in self.frames}

    def prefixes(self, *, protocol: int | None = None, family: int | None = None) -> set[str]:
        """The prefixes whose latest message was RTM_NEWROUTE (a DELROUTE removes one)."""
        state: dict[str, NlRoute] = {}
        with self.lock:
            for r in self.routes:
                state[r.prefix] = r
        out = set()
        for p, r in state.items():
            if not r.is_add or (protocol is not None and r.protocol != protocol):
                continue
            if family is not None and ipaddress.ip_network(p).version != family:
                continue
            out.add(p)
        return out

    def wait_for(self, predicate: Callable[[FpmListener], object], timeout: float = 30.0,
                 what: str = "FPM condition") -> None:
        wait_until(lambda: predicate(self), timeout, interval=0.1, what=what,
                   diagnostics=self.summary)

    def summary(self) -> str:
        with self.lock:
            return (f"FPM listener {self.host}:{self.port} in {self.ns}: "
                    f"{self.connections} connection(s), {len(self.frames)} frames, "
                    f"{len(self.routes)} route messages, netlink types {self.msg_types}, "
                    f"errors {self.errors}")

    def diagnostics(self) -> str:
        return self.summary()

