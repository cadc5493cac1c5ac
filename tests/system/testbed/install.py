"""Installing the test bed's tools from Debian's packages, and the skip-or-fail policy.

Everything is installed in one `apt-get install` (as PEERS.md says): wireshark-common's question
is preseeded first, and apt waits for the dpkg lock (another engineer's install on the same
machine holds it for a while) instead of failing at once. When every package is already
installed, `ensure_packages` costs one `dpkg-query` call and then nothing for the rest of the
process.

Policy (the same as conftest.py's for the linerate binary): a tool that is missing and cannot be
installed (not root, or LINERATE_NO_INSTALL set) makes the calling test skip with the reason,
unless LINERATE_REQUIRE_BIN or CI is set, in which case it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

# Debian package -> the programs the test bed runs from it.
PACKAGES: dict[str, tuple[str, ...]] = {
    "frr": ("/usr/lib/frr/zebra", "/usr/lib/frr/bgpd", "/usr/lib/frr/ospfd",
            "/usr/lib/frr/ospf6d", "/usr/lib/frr/staticd", "vtysh"),
    "bird2": ("bird", "birdc"),
    "tshark": ("tshark",),
    "nftables": ("nft",),
    "iproute2": ("ip",),
    "procps": ("pgrep", "sysctl"),
    "iputils-ping": ("ping",),
    "util-linux": ("nsenter",),
    "osmo-ggsn": ("sgsnemu", "osmo-ggsn"),
    "snmpd": ("snmpd",),
    "snmptrapd": ("snmptrapd",),
    "snmp": ("snmpwalk", "snmpbulkwalk", "snmpget"),
    "tmux": ("tmux",),
}

# Which package provides a program (by its base name), for error messages and install lists.
PROGRAM_PACKAGE = {Path(p).name: pkg for pkg, progs in PACKAGES.items() for p in progs}

_SBIN = ("/usr/sbin", "/sbin", "/usr/bin", "/bin")
_installed_ok: set[str] = set()


def _truthy(value: str | None) -> bool:
    return bool(value) and value.strip().lower() not in ("0", "false", "no", "off")


def tools_required() -> bool:
    """True when a missing tool must fail the test instead of skipping it (CI, or
    LINERATE_REQUIRE_BIN as conftest.py uses it for the binary)."""
    return _truthy(os.environ.get("LINERATE_REQUIRE_BIN")) or _truthy(os.environ.get("CI"))


def skip_or_fail(msg: str) -> None:
    """Skips the calling test with `msg`, or fails it when tools are required."""
    if tools_required():
        pytest.fail(msg + " (LINERATE_REQUIRE_BIN or CI is set, so this is a failure)",
                    pytrace=False)
    pytest.skip(msg)


def which(program: str) -> str | None:
    """The path of `program` (a name, or an absolute path), looking in the sbin directories
    too (they are not on every user's PATH)."""
    if os.path.isabs(program):
        return program if os.access(program, os.X_OK) else None
    found = shutil.which(program)
    if found:
        return found
    for d in _SBIN:
        p = os.path.join(d, program)
        if os.access(p, os.X_OK):
            return p
    return None


def missing_packages(packages: list[str] | tuple[str, ...]) -> list[str]:
    """The packages of `packages` that dpkg does not have installed (one dpkg-query call)."""
    want = [p for p in packages if p not in _installed_ok]
    if not want:
        return []
    r = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package} ${db:Status-Status}\n", *want],
        capture_output=True, text=True,
    )
    installed = set()
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] == "installed":
            installed.add(parts[0].split(":")[0])
    _installed_ok.update(installed)
    return [p for p in want if p not in installed]


def install_command(packages: list[str]) -> list[list[str]]:
    """The commands `ensure_packages` runs to install `packages` (for docs and tests)."""
    return [
        ["sh", "-c", "echo 'wireshark-common wireshark-common/install-setuid boolean false' "
                     "| debconf-set-selections"],
        ["apt-get", "-o", "DPkg::Lock::Timeout=600", "update", "-q"],
        ["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-q", *packages],
    ]


def ensure_packages(packages: list[str] | tuple[str, ...] | None = None) -> list[str]:
    """Installs whichever of `packages` (default: every package of PACKAGES) is missing, in one
    apt-get call, and returns what it installed ([] when nothing was missing: fast).

    Skips (or fails, see `skip_or_fail`) when something is missing and cannot be installed;
    fails when apt-get fails.
    """
    pkgs = list(packages if packages is not None else PACKAGES)
    missing = missing_packages(pkgs)
    if not missing:
        return []
    if os.geteuid() != 0:
        skip_or_fail(f"packages {' '.join(missing)} are not installed and this user is not root "
                     f"(apt-get install {' '.join(missing)})")
    if _truthy(os.environ.get("LINERATE_NO_INSTALL")):
        skip_or_fail(f"packages {' '.join(missing)} are not installed and LINERATE_NO_INSTALL "
                     "is set")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in install_command(missing):
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            pytest.fail(
                f"installing {' '.join(missing)} failed at {' '.join(cmd)!r} "
                f"(exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}",
                pytrace=False,
            )
    still = missing_packages(missing)
    if still:
        pytest.fail(f"apt-get install succeeded but {' '.join(still)} is not installed",
                    pytrace=False)
    return missing


def require_tools(*programs: str) -> dict[str, str]:
    """Returns {program: path} for each program, installing the test bed's packages (all of
    them, in one go) if any is missing; skips or fails the test if that is not possible."""
    found = {p: which(p) for p in programs}
    if any(v is None for v in found.values()):
        ensure_packages()
        found = {p: which(p) for p in programs}
    missing = [p for p, v in found.items() if v is None]
    if missing:
        pkgs = sorted({PROGRAM_PACKAGE.get(Path(p).name, "?") for p in missing})
        skip_or_fail(f"{', '.join(missing)} not found (Debian packages: {' '.join(pkgs)})")
    return {p: v for p, v in found.items() if v is not None}


def require_root() -> None:
    """Network namespaces, veths and the daemons need root."""
    if os.geteuid() != 0:
        skip_or_fail("the test bed needs root (network namespaces, veth, routing daemons)")
