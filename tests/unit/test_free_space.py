"""kafka_ops.free_space: a stopped broker's log dirs from its file, the df command (run here in bash on real
directories) and the parse of its output."""

from __future__ import annotations

import os
import subprocess

import pytest
from kafka_ops.free_space import DEFAULT_LOG_DIR, log_dirs, parse_usable_bytes, usable_bytes_command


def test_log_dirs_come_from_log_dirs_then_log_dir_then_kafkas_default():
    assert log_dirs({"log.dirs": "/d1, /d2 ,/d1,", "log.dir": "/x"}) == ["/d1", "/d2"]
    assert log_dirs({"log.dirs": " ", "log.dir": "/x"}) == ["/x"]
    assert log_dirs({}) == [DEFAULT_LOG_DIR] == ["/tmp/kafka-logs"]


def test_the_command_measures_each_dir_or_the_filesystem_it_would_be_created_on(tmp_path):
    existing = tmp_path / "data"
    existing.mkdir()
    not_yet = tmp_path / "new disk's dir" / "kafka"  # a space and a quote: quoted, not split
    dirs = [str(existing), str(not_yet)]
    out = subprocess.run(["bash", "-c", usable_bytes_command(dirs)], capture_output=True, text=True, check=True).stdout
    usable = parse_usable_bytes(out, dirs)
    stat = os.statvfs(tmp_path)
    expected = stat.f_bavail * stat.f_frsize
    assert list(usable) == dirs
    for figure in usable.values():  # the same filesystem as tmp_path: statvfs's figure, give or take other writers
        assert abs(figure - expected) < 64 * 1024 * 1024, (figure, expected)
    assert not not_yet.exists(), "measuring creates nothing"


def test_the_command_refuses_relative_or_no_dirs():
    with pytest.raises(ValueError, match="absolute"):
        usable_bytes_command(["/ok", "data"])
    with pytest.raises(ValueError, match="no log dir"):
        usable_bytes_command([])


def test_the_parse_names_a_missing_dir_and_a_df_without_byte_counts():
    assert parse_usable_bytes("/a\t10\n/b\t0\n", ["/b", "/a"]) == {"/b": 0, "/a": 10}
    with pytest.raises(ValueError, match=r"no figure for \['/b'\]"):
        parse_usable_bytes("/a\t10\n", ["/a", "/b"])
    with pytest.raises(ValueError, match="no byte count for /a"):
        parse_usable_bytes("/a\tAvail\n", ["/a"])
