"""A VLAN sub-interface for a host namespace, in user space.

The test machines' kernel has no 802.1Q devices (PEERS.md) and its bridge no VLAN filtering,
so a host cannot tag frames itself. `VlanShim` stands in for `ip link add ... type vlan`: a
process in the namespace bridges VLAN `vid` on a trunk device (tagged) with an access device
(untagged), normally one end of a veth pair whose other end carries the host's addresses for
that VLAN. Frames arriving tagged on the trunk lose the tag and leave by the access device;
frames from the access device leave the trunk tagged. The kernel strips tags on receive into
packet metadata, so the trunk side reads them back from PACKET_AUXDATA.
"""

from __future__ import annotations

from pathlib import Path

SHIM = r"""
import select, socket, struct, sys
trunk, access, vid = sys.argv[1], sys.argv[2], int(sys.argv[3])
SOL_PACKET, PACKET_AUXDATA, OUTGOING, VLAN_VALID = 263, 8, 4, 1 << 4
def sock(dev):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    s.bind((dev, 0))
    return s
t, a = sock(trunk), sock(access)
print("ready", flush=True)
while True:
    for s in select.select([t, a], [], [])[0]:
        data, anc, _, addr = s.recvmsg(65536, socket.CMSG_SPACE(32))
        if addr[2] == OUTGOING or len(data) < 14:
            continue
        tag = None
        for level, kind, d in anc:
            if level == SOL_PACKET and kind == PACKET_AUXDATA and len(d) >= 20:
                status, _, _, _, _, tci, _ = struct.unpack("IIIHHHH", d[:20])
                if status & VLAN_VALID:
                    tag = tci & 0xFFF
        if s is t:
            if tag is None and data[12:14] == b"\x81\x00":
                tag = struct.unpack("!H", data[14:16])[0] & 0xFFF
                data = data[:12] + data[16:]
            if tag == vid:
                a.send(data)
        elif tag is None:
            t.send(data[:12] + struct.pack("!HH", 0x8100, vid) + data[12:])
"""


class VlanShim:
    """Bridges VLAN `vid` on `trunk` with the untagged `access` device, in namespace `ns`."""

    def __init__(self, ns, trunk: str, access: str, vid: int, log: Path) -> None:
        self.ns, self.log = ns, log
        self.proc = ns.popen(["python3", "-c", SHIM, trunk, access, str(vid)], log=log,
                             name=f"vlan-shim-{vid}")

    def start(self) -> "VlanShim":
        from .netns import wait_until
        wait_until(lambda: "ready" in self.log.read_text() if self.log.exists() else False, 10,
                   what="the VLAN shim's sockets")
        return self

    def stop(self) -> None:
        self.proc.stop()
