"""Shared fixtures for Linerate's system tests.

These tests drive the real `linerate` binary; they build nothing. The binary is
`target/release/linerate` under the repository root, or whatever LINERATE_BIN names.

If the binary is missing the tests are skipped, unless LINERATE_REQUIRE_BIN is set (CI sets it),
in which case a missing binary is a failure.

Python requirements: `pip install -r tests/system/requirements.txt` (pytest, scapy).
tshark is installed on demand from Debian's packages when running as root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def _truthy(value: str | None) -> bool:
    return bool(value) and value.strip().lower() not in ("0", "false", "no", "off")


def binary_required() -> bool:
    return _truthy(os.environ.get("LINERATE_REQUIRE_BIN"))


def linerate_bin_path() -> Path:
    env = os.environ.get("LINERATE_BIN")
    if env:
        p = Path(env)
        return p if p.is_absolute() else (REPO_ROOT / p)
    return REPO_ROOT / "target" / "release" / "linerate"


@pytest.fixture(scope="session")
def linerate_bin() -> Path:
    """Path of the `linerate` binary; skips (or fails under LINERATE_REQUIRE_BIN) if missing."""
    p = linerate_bin_path()
    if not (p.is_file() and os.access(p, os.X_OK)):
        msg = (
            f"linerate binary not found or not executable at {p} "
            "(build it with `cargo build --release -p linerate`, or set LINERATE_BIN)"
        )
        if binary_required():
            pytest.fail(msg + "; LINERATE_REQUIRE_BIN is set, so this is a failure", pytrace=False)
        pytest.skip(msg)
    return p


def ensure_tshark() -> str:
    """Returns the path of tshark, installing it from Debian's packages if missing.

    Installing needs root; without root and without tshark, the calling test is skipped.
    """
    found = shutil.which("tshark")
    if found:
        return found
    if os.geteuid() != 0:
        pytest.skip(
            "tshark is not installed and this user is not root, so it cannot be installed "
            "(apt-get install tshark)"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    steps = [
        ["apt-get", "update"],
        ["sh", "-c",
         "echo 'wireshark-common wireshark-common/install-setuid boolean false' "
         "| debconf-set-selections"],
        ["apt-get", "install", "-y", "tshark"],
    ]
    for cmd in steps:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
        if r.returncode != 0:
            pytest.fail(
                f"installing tshark failed at {' '.join(cmd)!r} (exit {r.returncode}):\n"
                f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}",
                pytrace=False,
            )
    found = shutil.which("tshark")
    if not found:
        pytest.fail("apt-get install tshark succeeded but tshark is not on PATH", pytrace=False)
    return found


@pytest.fixture(scope="session")
def tshark() -> str:
    return ensure_tshark()
