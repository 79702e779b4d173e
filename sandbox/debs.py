"""The Debian packages the sandbox runs (ZooKeeper, sshd, Java) and the check that they are there (Kafka and
Burrow come from ``make install``: :mod:`sandbox.kafka_release`, :mod:`sandbox.burrow_build`).

Each package is identified by a file it installs, so the check is a stat, not a dpkg call.
"""

from __future__ import annotations

import shutil
from pathlib import Path

# package -> the files `sandbox up` uses from it
REQUIRED: dict[str, tuple[str, ...]] = {
    "zookeeper": ("/usr/share/java/zookeeper.jar",),
    "openssh-server": ("/usr/sbin/sshd",),
    "openssh-client": ("/usr/bin/ssh-keygen",),
    "default-jre-headless": ("/usr/bin/java",),
}

JAVA = "/usr/bin/java"
SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "/usr/bin/ssh-keygen"


class MissingPackage(RuntimeError):
    """A Debian package the sandbox needs is not installed; the message says how to install it."""


def missing_packages() -> dict[str, str]:
    """``{package: the missing file}`` for every required package that is not installed."""
    missing = {}
    for package, files in REQUIRED.items():
        for path in files:
            if not Path(path).exists() and not (package == "default-jre-headless" and shutil.which("java")):
                missing[package] = path
                break
    return missing


def check_packages() -> None:
    """Raise when any required Debian package is missing.

    Raises:
        MissingPackage: names each missing package with the file that was not found, and the
            ``apt-get install`` command that fixes it.
    """
    missing = missing_packages()
    if missing:
        names = " ".join(missing)
        details = "; ".join(f"{pkg} ({path} not found)" for pkg, path in missing.items())
        raise MissingPackage(
            f"missing Debian package(s): {details}. Install with: "
            f"sudo apt-get install -y --no-install-recommends {names}   (or: make debs)"
        )
