#!/usr/bin/env python3
"""Minimal FPM server: accepts zebra's dplane_fpm_nl TCP connection and decodes every frame.

FPM header: u8 version (1), u8 type (1 = netlink), u16 length (big endian, header included),
then one or more netlink messages. Prints one line per netlink message and flags anything
MPLS-related: AF_MPLS (28) family, RTA_NEWDST (19), RTA_VIA (18), RTA_ENCAP_TYPE (21) /
RTA_ENCAP (22) at top level or inside RTA_MULTIPATH, NHA_ENCAP_TYPE/NHA_ENCAP (7/8) in nexthops.
Usage: fpm_dump.py [port] [logfile]
"""
import os
import socket
import struct
import sys
import time

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 2620
LOG = open(sys.argv[2], "a", buffering=1) if len(sys.argv) > 2 else sys.stdout

NLTYPES = {24: "RTM_NEWROUTE", 25: "RTM_DELROUTE", 104: "RTM_NEWNEXTHOP", 105: "RTM_DELNEXTHOP",
           28: "RTM_NEWNEIGH", 29: "RTM_DELNEIGH"}
FAM = {2: "inet", 10: "inet6", 28: "MPLS", 7: "bridge", 0: "unspec"}
RTA = {1: "DST", 2: "SRC", 4: "OIF", 5: "GATEWAY", 6: "PRIORITY", 7: "PREFSRC", 9: "MULTIPATH",
       12: "CACHEINFO", 15: "TABLE", 18: "VIA", 19: "NEWDST", 21: "ENCAP_TYPE", 22: "ENCAP",
       30: "NH_ID"}
NHA = {1: "ID", 2: "GROUP", 3: "GROUP_TYPE", 4: "BLACKHOLE", 5: "OIF", 6: "GATEWAY",
       7: "ENCAP_TYPE", 8: "ENCAP"}


def log(msg):
    LOG.write(f"{time.strftime('%H:%M:%S')} {msg}\n")


def attrs(buf):
    off = 0
    while off + 4 <= len(buf):
        ln, ty = struct.unpack_from("<HH", buf, off)
        if ln < 4:
            break
        yield ty & 0x3FFF, buf[off + 4: off + ln]
        off += (ln + 3) & ~3


def labels(b):
    out = []
    for i in range(0, len(b) - 3, 4):
        v = struct.unpack_from(">I", b, i)[0]
        out.append(v >> 12)
    return out


def ip(fam, b):
    try:
        return socket.inet_ntop(socket.AF_INET if fam == 2 else socket.AF_INET6, b)
    except (ValueError, OSError):
        return b.hex()


def encap_desc(etype, enc):
    s = f"ENCAP_TYPE={etype}{'(MPLS)' if etype == 1 else ''}"
    if enc is not None and etype == 1:
        for t, v in attrs(enc):
            if t == 1:  # MPLS_IPTUNNEL_DST
                s += f" labels={labels(v)}"
    return s


def route(hdr_type, body):
    fam, dlen, slen, tos, table, proto, scope, rtype, flags = struct.unpack_from("<BBBBBBBBI", body)
    a = dict()
    mpls = []
    if fam == 28:
        mpls.append("AF_MPLS")
    desc = []
    etype = None
    enc = None
    for t, v in attrs(body[12:]):
        name = RTA.get(t, str(t))
        if t == 1:
            desc.append(f"dst={labels(v) if fam == 28 else ip(fam, v)}/{dlen}")
        elif t == 5:
            desc.append(f"gw={ip(fam, v)}")
        elif t == 4:
            desc.append(f"oif={struct.unpack('<i', v)[0]}")
        elif t == 30:
            desc.append(f"nhid={struct.unpack('<I', v)[0]}")
        elif t == 15:
            desc.append(f"table={struct.unpack('<I', v)[0]}")
        elif t == 19:
            mpls.append(f"RTA_NEWDST labels={labels(v)}")
        elif t == 18:
            mpls.append("RTA_VIA")
        elif t == 21:
            etype = struct.unpack_from("<H", v)[0]
        elif t == 22:
            enc = v
        elif t == 9:
            off = 0
            n = 0
            while off + 8 <= len(v):
                ln, fl, hops, ifi = struct.unpack_from("<HBBi", v, off)
                if ln < 8:
                    break
                sub_et, sub_enc, gw = None, None, None
                for st, sv in attrs(v[off + 8: off + ln]):
                    if st == 21:
                        sub_et = struct.unpack_from("<H", sv)[0]
                    elif st == 22:
                        sub_enc = sv
                    elif st == 5:
                        gw = ip(fam, sv)
                    elif st == 19:
                        mpls.append(f"mp[{n}] RTA_NEWDST labels={labels(sv)}")
                    elif st == 18:
                        mpls.append(f"mp[{n}] RTA_VIA")
                desc.append(f"mp[{n}]gw={gw},if={ifi}")
                if sub_et is not None or sub_enc is not None:
                    mpls.append(f"mp[{n}] " + encap_desc(sub_et, sub_enc))
                off += (ln + 3) & ~3
                n += 1
        else:
            desc.append(name)
    if etype is not None or enc is not None:
        mpls.append(encap_desc(etype, enc))
    return (f"{NLTYPES.get(hdr_type, hdr_type)} fam={FAM.get(fam, fam)} proto={proto} "
            f"table={table} type={rtype} " + " ".join(desc)), mpls


def nexthop(hdr_type, body):
    fam, scope, proto, _, flags = struct.unpack_from("<BBBBI", body)
    desc, mpls = [], []
    etype, enc = None, None
    for t, v in attrs(body[8:]):
        if t == 1:
            desc.append(f"id={struct.unpack('<I', v)[0]}")
        elif t == 5:
            desc.append(f"oif={struct.unpack('<i', v)[0]}")
        elif t == 6:
            desc.append(f"gw={ip(fam, v)}")
        elif t == 2:
            desc.append(f"group={[struct.unpack_from('<I', v, i)[0] for i in range(0, len(v), 8)]}")
        elif t == 7:
            etype = struct.unpack_from("<H", v)[0]
        elif t == 8:
            enc = v
        else:
            desc.append(NHA.get(t, str(t)))
    if etype is not None or enc is not None:
        mpls.append("NHA_" + encap_desc(etype, enc))
    if fam == 28:
        mpls.append("AF_MPLS")
    return (f"{NLTYPES.get(hdr_type, hdr_type)} fam={FAM.get(fam, fam)} proto={proto} "
            + " ".join(desc)), mpls


def handle(frame, stats):
    off = 0
    while off + 16 <= len(frame):
        nlen, ntype, nflags, seq, pid = struct.unpack_from("<IHHII", frame, off)
        body = frame[off + 16: off + nlen]
        if ntype in (24, 25):
            s, mpls = route(ntype, body)
        elif ntype in (104, 105):
            s, mpls = nexthop(ntype, body)
        else:
            s, mpls = f"nlmsg type {ntype} len {nlen}", []
        stats["msgs"] += 1
        if body and body[0] == 28:
            stats["af_mpls"] += 1
        if mpls:
            stats["mpls_flagged"] += 1
            s += "   *** MPLS: " + "; ".join(mpls)
        log(s)
        if nlen < 16:
            break
        off += (nlen + 3) & ~3


def main():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", PORT))
    srv.listen(1)
    log(f"listening on 127.0.0.1:{PORT} pid {os.getpid()}")
    while True:
        conn, peer = srv.accept()
        log(f"connection from {peer}")
        stats = {"frames": 0, "msgs": 0, "af_mpls": 0, "mpls_flagged": 0}
        buf = b""
        while True:
            data = conn.recv(65536)
            if not data:
                break
            buf += data
            while len(buf) >= 4:
                ver, typ, ln = struct.unpack_from(">BBH", buf)
                if len(buf) < ln:
                    break
                frame, buf = buf[4:ln], buf[ln:]
                stats["frames"] += 1
                if ver != 1 or typ != 1:
                    log(f"unexpected FPM header ver={ver} type={typ} len={ln}")
                    continue
                handle(frame, stats)
            log(f"STATS {stats}") if stats["frames"] % 50 == 0 else None
        log(f"connection closed; STATS {stats}")
        conn.close()


if __name__ == "__main__":
    main()
