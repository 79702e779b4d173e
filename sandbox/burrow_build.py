"""Burrow for the sandbox: Debian's Burrow 1.2.1, built from Debian's source with two changes for Kafka 4.x.

Burrow rates consumer groups from the log end offsets it fetches from the brokers and the offsets the groups
commit to ``__consumer_offsets``. Burrow 1.2.1 (the release Debian ships, bookworm to sid) cannot do either on
a current cluster: it asks for log end offsets with ListOffsets **version 0**, which Kafka 4.0 removed
(KIP-896: every broker of a 4.x cluster closes the connection, "failed to fetch offsets from broker: EOF"),
and it cannot decode the offset commit records Kafka 4.1 writes (OffsetCommitValue **version 4**, the first
flexible one: "failed to decode ... value version 4", so every group looks stopped). Later Burrow releases
handle both, but the Go module proxy refuses ``github.com/linkedin/Burrow`` (403 for every version), so the
sandbox builds Burrow the way Debian does, from the same source and the same Go libraries, with those changes:

- source: Debian's ``burrow_1.2.1.orig.tar.gz`` (:data:`SOURCE_URL`, SHA-256 :data:`SOURCE_SHA256` checked);
- libraries: Debian's ``golang-*-dev`` packages (the package's Build-Depends: sarama 1.22.1, zap, viper,
  go-zookeeper, ...; ``make debs`` installs them), used in GOPATH mode from ``/usr/share/gocode``;
- the changes (:data:`PATCH`): ``core/internal/cluster/kafka_cluster.go`` builds its OffsetRequest with
  ``Version: 1`` (ListOffsets v1, Kafka 0.10.1+; sarama fills ``Offsets[0]`` from v1's single offset, which
  Burrow reads); ``core/internal/consumer/kafka_client.go`` decodes OffsetCommitValue v4 beside v0, v1 and v3
  (Kafka's ``OffsetCommitValue.json``: offset, leader epoch, metadata as a compact string, commit timestamp,
  tagged fields). Nothing else differs from Debian's 1.2.1: its evaluator still rates groups.

``python -m sandbox.burrow_build`` (``make install``) builds ``.cache/burrow/<version>/Burrow`` when it is
missing (about 25 s); :func:`binary` is what ``sandbox up`` starts.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

from sandbox.kafka_release import CACHE_DIR

VERSION = "1.2.1"
BUILD = f"{VERSION}+kafka4"
SOURCE_URL = f"http://deb.debian.org/debian/pool/main/b/burrow/burrow_{VERSION}.orig.tar.gz"
SOURCE_SHA256 = "aa20b0c62f1b2b8ef004150f13f149e1d21b7100d3d380cd588bf319057ade63"
GOCODE = "/usr/share/gocode"  # where Debian's golang-*-dev packages install their sources
_OFFSET_VALUE_V4 = """// kafka-ops: OffsetCommitValue v4 (Kafka 4.1+; KIP-915, the first flexible version):
// offset int64, leaderEpoch int32, metadata compact string (unsigned varint length + 1), commitTimestamp int64,
// tagged fields
func decodeOffsetValueV4(valueBuffer *bytes.Buffer) (offsetValue, string) {
	offsetValue := offsetValue{}
	if err := binary.Read(valueBuffer, binary.BigEndian, &offsetValue.Offset); err != nil {
		return offsetValue, "offset"
	}
	var leaderEpoch int32
	if err := binary.Read(valueBuffer, binary.BigEndian, &leaderEpoch); err != nil {
		return offsetValue, "leaderEpoch"
	}
	length, err := binary.ReadUvarint(valueBuffer)
	if err != nil || (length > 1 && len(valueBuffer.Next(int(length-1))) != int(length-1)) {
		return offsetValue, "metadata"
	}
	if err := binary.Read(valueBuffer, binary.BigEndian, &offsetValue.Timestamp); err != nil {
		return offsetValue, "timestamp"
	}
	return offsetValue, ""
}

func decodeOffsetValueV3("""

#: (file, text in Debian's source, replacement): each text must occur exactly once.
PATCH = (
    ("core/internal/cluster/kafka_cluster.go",
     "requests[broker.ID()] = &sarama.OffsetRequest{}",
     "requests[broker.ID()] = &sarama.OffsetRequest{Version: 1} // kafka-ops: ListOffsets v1 (KIP-896)"),
    ("core/internal/consumer/kafka_client.go",
     "\tcase 3:\n\t\tmodule.decodeAndSendOffset(offsetKey, valueBuffer, offsetLogger, decodeOffsetValueV3)\n",
     "\tcase 3:\n\t\tmodule.decodeAndSendOffset(offsetKey, valueBuffer, offsetLogger, decodeOffsetValueV3)\n"
     "\tcase 4:\n\t\tmodule.decodeAndSendOffset(offsetKey, valueBuffer, offsetLogger, decodeOffsetValueV4)\n"),
    ("core/internal/consumer/kafka_client.go", "func decodeOffsetValueV3(", _OFFSET_VALUE_V4),
)
#: Debian packages of the build: Burrow's Build-Depends (Debian's source package) besides Go itself.
BUILD_PACKAGES = (
    "golang-github-shopify-sarama-dev", "golang-github-samuel-go-zookeeper-dev", "golang-github-spf13-viper-dev",
    "golang-go.uber-zap-dev", "golang-gopkg-natefinch-lumberjack.v2-dev", "golang-github-julienschmidt-httprouter-dev",
    "golang-github-karrick-goswarm-dev", "golang-github-oneofone-xxhash-dev", "golang-github-pborman-uuid-dev",
)


class BurrowBuildError(RuntimeError):
    """Burrow is not built or could not be built; the message says what to run or what failed."""


def binary(cache_dir: Path | None = None) -> Path:
    """The path of the built Burrow (whether or not it exists)."""
    return (cache_dir or CACHE_DIR) / "burrow" / BUILD / "Burrow"


def require(cache_dir: Path | None = None) -> Path:
    """The built Burrow.

    Raises:
        BurrowBuildError: not built (the message names the command that builds it).
    """
    path = binary(cache_dir)
    if not path.is_file():
        raise BurrowBuildError(f"Burrow is not built ({path} missing): run `make install` "
                               "(or `python -m sandbox.burrow_build`)")
    return path


def _download(url: str, sha256: str, dest: Path, attempts: int = 3) -> None:
    last: Exception | None = None
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                data = response.read()
            break
        except OSError as exc:
            last = exc
            time.sleep(2 * (attempt + 1))
    else:
        raise BurrowBuildError(f"cannot download {url}: {last}")
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise BurrowBuildError(f"{url}: SHA-256 {digest}, expected {sha256}")
    dest.write_bytes(data)


def apply_patch(source: Path) -> None:
    """Apply :data:`PATCH` to the unpacked source at ``source``.

    Raises:
        BurrowBuildError: a file does not hold the expected text exactly once (another source version).
    """
    for name, old, new in PATCH:
        path = source / name
        text = path.read_text()
        if text.count(old) != 1:
            raise BurrowBuildError(f"{path}: expected exactly one {old!r}")
        path.write_text(text.replace(old, new))


def build(cache_dir: Path | None = None, go: str | None = None, say=print) -> Path:
    """Build Burrow unless it is built; returns the binary's path.

    Raises:
        BurrowBuildError: Go or a build package missing, the download or the build failed.
    """
    target = binary(cache_dir)
    if target.is_file():
        return target
    go = go or shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(go).exists():
        raise BurrowBuildError("the Go toolchain (`go`) is needed to build Burrow: apt-get install golang-go")
    if not Path(GOCODE, "src/github.com/Shopify/sarama").is_dir():
        raise BurrowBuildError(f"Burrow's Go libraries are missing from {GOCODE}: apt-get install "
                               + " ".join(BUILD_PACKAGES) + "   (or: make debs)")
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="burrow-build-") as tmp:
        archive = Path(tmp) / "burrow.orig.tar.gz"
        _download(SOURCE_URL, SOURCE_SHA256, archive)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        unpacked = next(p for p in Path(tmp).iterdir() if p.is_dir())
        gopath = Path(tmp) / "gopath"
        source = gopath / "src/github.com/linkedin/Burrow"
        source.parent.mkdir(parents=True)
        unpacked.rename(source)
        apply_patch(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "GO111MODULE": "off", "GOPATH": f"{gopath}:{GOCODE}", "GOFLAGS": "",
               "CGO_ENABLED": "1"}
        result = subprocess.run([go, "build", "-o", str(target) + ".tmp", "."], cwd=source, env=env,
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise BurrowBuildError("go build of Burrow failed:\n" + (result.stdout + result.stderr)[-3000:])
        Path(str(target) + ".tmp").replace(target)
    say(f"Burrow {BUILD} built from Debian's source in {time.monotonic() - began:.1f} s -> {target}")
    return target


def main() -> int:
    """``python -m sandbox.burrow_build``: build Burrow when missing; returns the exit code."""
    try:
        build()
    except BurrowBuildError as exc:
        print(f"burrow_build: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
