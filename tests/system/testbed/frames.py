"""Raw frames for tests that speak below IP: MAC addresses as bytes, MPLS label stack entries,
and sending a frame N times out of a device in a namespace (an AF_PACKET socket, run there)."""

from __future__ import annotations

_SEND = r"""
import socket, sys
dev, frame, n = sys.argv[1], bytes.fromhex(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((dev, 0))
for _ in range(n):
    s.send(frame)
"""


def send(ns, dev: str, frame: bytes, n: int) -> None:
    """Sends `frame` (a whole Ethernet frame) `n` times out of `dev` in namespace `ns`."""
    ns.run(["python3", "-c", _SEND, dev, frame.hex(), str(n)])


def mac(s: str) -> bytes:
    return bytes.fromhex(s.replace(":", ""))


def mpls_entry(label: int, bottom: bool = True, ttl: int = 64) -> bytes:
    """One label stack entry (RFC 3032), traffic class 0."""
    return bytes([label >> 12 & 0xFF, label >> 4 & 0xFF, (label & 0xF) << 4 | int(bottom), ttl])
