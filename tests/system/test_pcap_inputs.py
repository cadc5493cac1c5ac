"""System test: what `linerate run` makes of input captures that are not plain, whole pcap files.

Each test writes a capture of IPv4 UDP frames to 10.1.2.x (routed out of p1) into p0, runs
`linerate run CONFIG --json` on it and checks that every record is accounted for: delivered
(`rx_packets`) or skipped (`rx_errors`), with a warning for a skip and an error naming the file,
the record and its byte offset (and a non-zero exit) for a damaged file. Then the formats: pcap
files whose link-type field carries extension bits above the low 16 (as 45 of tcpdump's test
captures do), and pcapng files, compared frame for frame with the same capture as classic pcap.

| capture            | records                                  | expected                          |
| ---                | ---                                      | ---                               |
| oversize.pcap      | 60 B, 9300 B, 60 B                       | rx 2, rx_errors 1, warning, rc 0  |
| truncated.pcap     | 5 x 60 B, the last cut 30 bytes short    | rx 4, rx_errors 1, error, rc != 0 |
| badheader.pcap     | 5 x 60 B, record 2 claims 0x7fffffff B   | rx 1, rx_errors 1, error, rc != 0 |
| lt30000001.pcap    | 3 x 60 B, link type 0x30000001           | read as Ethernet, rc 0            |
| in.pcapng          | in.pcap (60..1400 B) made pcapng by editcap | out1 as for in.pcap            |

Output: a `tx` file named `.pcapng` is pcapng, its interface named after the port, every frame
outbound; tshark reads the same frames from it as from the classic pcap of the same run.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

RUN_TIMEOUT = 120  # seconds; each run drains a handful of frames

CONFIG = """\
router: { workers: 1 }
ports:
  - { name: p0, driver: pcap, rx: {rx}, tx: out0.pcap }
  - { name: p1, driver: pcap, tx: out1.pcap }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24], mtu: 9198 }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [198.51.100.1/24], mtu: 9198 }
neighbors:
  - { interface: p1, ip: 198.51.100.2, mac: "02:00:00:00:01:02" }
routes:
  - { prefix: 10.0.0.0/8, via: 198.51.100.2 }
"""

# Little-endian, microseconds, snaplen 262144; the link type is filled in.
def file_header(linktype: int = 1) -> bytes:
    return struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, linktype)


def inet_checksum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(dst: str, size: int = 60) -> bytes:
    """An IPv4 UDP frame of `size` bytes from 192.0.2.2 to `dst`, addressed to p0."""
    pl = size - 14 - 20 - 8
    udp = struct.pack("!HHHH", 50001, 60001, 8 + pl, 0) + b"x" * pl
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                    ipaddress.IPv4Address("192.0.2.2").packed, ipaddress.IPv4Address(dst).packed)
    h = h[:10] + struct.pack("!H", inet_checksum(h)) + h[12:]
    return bytes.fromhex("020000000001020000000002") + b"\x08\x00" + h + udp


def record(f: bytes, caplen: int | None = None) -> bytes:
    return struct.pack("<IIII", 1, 0, len(f) if caplen is None else caplen, len(f)) + f


def run(linerate_bin: Path, folder: Path, rx: str, tx1: str = "out1.pcap"
        ) -> subprocess.CompletedProcess:
    config = folder / f"{rx}.yaml"
    config.write_text(CONFIG.replace("{rx}", rx).replace("out1.pcap", tx1))
    return subprocess.run([str(linerate_bin), "run", str(config), "--json"], cwd=folder,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)


def port(proc: subprocess.CompletedProcess, name: str) -> dict:
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise AssertionError(f"stdout is not one JSON object ({e}):\n{proc.stdout[-3000:]}"
                             f"\nstderr:\n{proc.stderr[-3000:]}")
    (p,) = [p for p in doc["ports"] if p["name"] == name]
    return p


def frames_of(path: Path) -> list[bytes]:
    """The frames of a classic pcap file, read by hand (nothing guessed)."""
    data = path.read_bytes()
    assert struct.unpack("<I", data[:4])[0] in (0xA1B2C3D4, 0xA1B23C4D), f"{path} is not pcap"
    out, at = [], 24
    while at < len(data):
        caplen = struct.unpack("<I", data[at + 8:at + 12])[0]
        out.append(data[at + 16:at + 16 + caplen])
        at += 16 + caplen
    return out


# ---------------------------------------------------------------------------------------------
# 1. Every record is delivered or counted


def test_oversize_record_is_skipped_counted_and_warned(linerate_bin: Path, tmp_path: Path):
    (tmp_path / "oversize.pcap").write_bytes(
        file_header() + record(frame("10.1.2.1")) + record(frame("10.1.2.2", 9300))
        + record(frame("10.1.2.3")))
    r = run(linerate_bin, tmp_path, "oversize.pcap")
    assert r.returncode == 0, f"a skipped record is no read error; stderr:\n{r.stderr}"
    p0 = port(r, "p0")
    assert (p0["rx_packets"], p0["rx_errors"]) == (2, 1), p0
    assert port(r, "p1")["tx_packets"] == 2
    warn = [ln for ln in r.stderr.splitlines() if "oversize.pcap" in ln]
    assert len(warn) == 1, r.stderr
    assert "warning" in warn[0] and "record 2 at byte offset 100" in warn[0], warn[0]
    assert "9300 bytes" in warn[0], warn[0]


def test_truncated_file_is_counted_reported_and_fails_the_run(linerate_bin: Path,
                                                               tmp_path: Path):
    whole = file_header() + b"".join(record(frame(f"10.1.2.{i}")) for i in range(1, 6))
    (tmp_path / "truncated.pcap").write_bytes(whole[:-30])
    r = run(linerate_bin, tmp_path, "truncated.pcap")
    assert r.returncode != 0, f"a cut file must fail the run; stderr:\n{r.stderr}"
    p0 = port(r, "p0")  # the counters are still printed
    assert (p0["rx_packets"], p0["rx_errors"]) == (4, 1), p0
    assert port(r, "p1")["tx_packets"] == 4
    # Record 5 starts at 24 + 4 * (16 + 60).
    assert "truncated.pcap: record 5 at byte offset 328: malformed pcap file: truncated record" \
        in r.stderr, r.stderr
    assert "p0" in r.stderr.splitlines()[-1], r.stderr
    assert "panick" not in r.stderr.lower()


def test_impossible_record_header_is_counted_reported_and_fails_the_run(linerate_bin: Path,
                                                                        tmp_path: Path):
    (tmp_path / "badheader.pcap").write_bytes(
        file_header() + record(frame("10.1.2.1")) + record(frame("10.1.2.2"), caplen=0x7FFFFFFF)
        + b"".join(record(frame(f"10.1.2.{i}")) for i in range(3, 6)))
    r = run(linerate_bin, tmp_path, "badheader.pcap")
    assert r.returncode != 0, f"a damaged file must fail the run; stderr:\n{r.stderr}"
    p0 = port(r, "p0")
    assert (p0["rx_packets"], p0["rx_errors"]) == (1, 1), p0
    assert "badheader.pcap: record 2 at byte offset 100: malformed pcap file" in r.stderr, r.stderr


def test_whole_file_runs_clean(linerate_bin: Path, tmp_path: Path):
    """Control for the three above: the same frames, whole, give no error and no message."""
    (tmp_path / "whole.pcap").write_bytes(
        file_header() + b"".join(record(frame(f"10.1.2.{i}")) for i in range(1, 6)))
    r = run(linerate_bin, tmp_path, "whole.pcap")
    assert r.returncode == 0, r.stderr
    p0 = port(r, "p0")
    assert (p0["rx_packets"], p0["rx_errors"]) == (5, 0), p0
    assert r.stderr.strip() == "", r.stderr


# ---------------------------------------------------------------------------------------------
# 2. Formats


@pytest.mark.parametrize("linktype", [0x30000001, 0x40000001, 0x04000001])
def test_linktype_extension_bits_are_ignored(linerate_bin: Path, tmp_path: Path, linktype: int):
    frames = [frame(f"10.1.2.{i}") for i in range(1, 4)]
    (tmp_path / "lt.pcap").write_bytes(file_header(linktype) + b"".join(map(record, frames)))
    r = run(linerate_bin, tmp_path, "lt.pcap")
    assert r.returncode == 0, r.stderr
    assert (port(r, "p0")["rx_packets"], port(r, "p1")["tx_packets"]) == (3, 3)


def test_other_link_types_are_still_refused(linerate_bin: Path, tmp_path: Path):
    (tmp_path / "sll.pcap").write_bytes(file_header(113) + record(frame("10.1.2.1")))
    r = run(linerate_bin, tmp_path, "sll.pcap")
    assert r.returncode != 0
    assert "sll.pcap: link type 113 is not Ethernet (1)" in r.stderr, r.stderr


@pytest.fixture(scope="module")
def editcap() -> str:
    found = shutil.which("editcap")
    if not found:
        pytest.skip("editcap (Wireshark) is not installed")
    return found


def test_pcapng_input_forwards_as_its_pcap_twin(linerate_bin: Path, tmp_path: Path,
                                                editcap: str, tshark: str):
    """editcap turns a pcap into pcapng; both runs must send out exactly the same frames."""
    frames = [frame(f"10.1.{i}.{i + 1}", 60 + i * 67) for i in range(20)]
    pcap_dir, ng_dir = tmp_path / "pcap", tmp_path / "pcapng"
    pcap_dir.mkdir()
    ng_dir.mkdir()
    (pcap_dir / "in.pcap").write_bytes(file_header() + b"".join(map(record, frames)))
    conv = subprocess.run([editcap, "-F", "pcapng", str(pcap_dir / "in.pcap"),
                           str(ng_dir / "in.pcapng")], capture_output=True, text=True, timeout=60)
    assert conv.returncode == 0, conv.stderr
    assert (ng_dir / "in.pcapng").read_bytes()[:4] == bytes.fromhex("0a0d0d0a")
    want = run(linerate_bin, pcap_dir, "in.pcap")
    got = run(linerate_bin, ng_dir, "in.pcapng")
    assert want.returncode == 0 and got.returncode == 0, (want.stderr, got.stderr)
    assert port(got, "p0") == port(want, "p0") and port(got, "p1") == port(want, "p1")
    assert port(got, "p0")["rx_packets"] == 20
    out_want, out_got = frames_of(pcap_dir / "out1.pcap"), frames_of(ng_dir / "out1.pcap")
    assert len(out_got) == 20 and out_got == out_want


def test_truncated_pcapng_fails_the_run(linerate_bin: Path, tmp_path: Path, editcap: str):
    frames = [frame(f"10.1.2.{i}") for i in range(1, 6)]
    (tmp_path / "in.pcap").write_bytes(file_header() + b"".join(map(record, frames)))
    subprocess.run([editcap, "-F", "pcapng", str(tmp_path / "in.pcap"),
                    str(tmp_path / "whole.pcapng")], check=True, capture_output=True, timeout=60)
    whole = (tmp_path / "whole.pcapng").read_bytes()
    (tmp_path / "cut.pcapng").write_bytes(whole[:-10])
    r = run(linerate_bin, tmp_path, "cut.pcapng")
    assert r.returncode != 0, r.stderr
    p0 = port(r, "p0")
    assert (p0["rx_packets"], p0["rx_errors"]) == (4, 1), p0
    assert "cut.pcapng: record 5 at byte offset" in r.stderr, r.stderr


def test_pcapng_output_names_the_port_and_marks_frames_outbound(linerate_bin: Path,
                                                                tmp_path: Path, tshark: str):
    frames = [frame(f"10.1.{i}.{i + 1}", 60 + i * 67) for i in range(10)]
    (tmp_path / "in.pcap").write_bytes(file_header() + b"".join(map(record, frames)))
    r = run(linerate_bin, tmp_path, "in.pcap", tx1="out1.pcapng")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out1.pcapng"
    assert out.read_bytes()[:4] == bytes.fromhex("0a0d0d0a")
    p = subprocess.run([tshark, "-r", str(out), "-T", "fields", "-e", "frame.interface_name",
                        "-e", "frame.packet_flags_direction", "-e", "frame.len", "-e", "eth.dst",
                        "-e", "ip.dst", "-e", "ip.ttl"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    rows = [tuple(ln.split("\t")) for ln in p.stdout.splitlines() if ln.strip()]
    assert rows == [("p1", "0x00000002", str(len(f)), "02:00:00:00:01:02",
                     f"10.1.{i}.{i + 1}", "63") for i, f in enumerate(frames)], rows
