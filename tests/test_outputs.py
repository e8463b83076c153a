"""Safe writing (cpsched.outputs, docs/guarantees.md): files under their directory only,
written whole (temporary file + rename), never through a symlink, never over an existing
result, one run's files never mixed with another's."""

from __future__ import annotations

import multiprocessing as mp
import os
import stat
from pathlib import Path

import pytest

from cpsched.outputs import (
    OutputError,
    check_stem,
    leftover_temps,
    output_dir,
    write_file,
    write_set,
)


def _text(content: str):  # noqa: ANN202
    def writer(path: Path) -> None:
        path.write_text(content)

    return writer


def test_write_set_names_and_never_overwrites(tmp_path: Path) -> None:
    first = write_set(tmp_path, "run", {".json": _text("A"), ".png": _text("A")})
    assert first == [tmp_path / "run.json", tmp_path / "run.png"]
    second = write_set(tmp_path, "run", {".json": _text("B"), ".png": _text("B")})
    assert second == [tmp_path / "run-2.json", tmp_path / "run-2.png"]
    assert (tmp_path / "run.json").read_text() == "A"
    assert [p.read_text() for p in second] == ["B", "B"]
    assert leftover_temps(tmp_path) == []


def test_one_taken_name_moves_the_whole_set(tmp_path: Path) -> None:
    (tmp_path / "run.png").write_text("someone else's")
    paths = write_set(tmp_path, "run", {".json": _text("A"), ".png": _text("A")})
    assert [p.name for p in paths] == ["run-2.json", "run-2.png"]
    assert not (tmp_path / "run.json").exists()
    assert (tmp_path / "run.png").read_text() == "someone else's"


def test_symlinks_are_never_written_through(tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    (tmp_path / "run.json").symlink_to(target)
    (tmp_path / "gone.json").symlink_to(tmp_path / "missing")  # dangling: still taken
    write_set(tmp_path, "run", {".json": _text("A")})
    write_set(tmp_path, "gone", {".json": _text("A")})
    assert target.read_text() == "keep me" and (tmp_path / "run-2.json").read_text() == "A"
    assert not (tmp_path / "missing").exists() and (tmp_path / "gone-2.json").exists()


def test_failing_writer_leaves_nothing(tmp_path: Path) -> None:
    def boom(path: Path) -> None:
        path.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_set(tmp_path, "run", {".json": _text("A"), ".png": boom})
    assert list(tmp_path.iterdir()) == []


def test_written_files_get_normal_permissions(tmp_path: Path) -> None:
    (path,) = write_set(tmp_path, "run", {".json": _text("A")})
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask


@pytest.mark.parametrize("stem", ["../x", "/tmp/x", "a/b", "..", ".", "", "a\nb", "x" * 101])
def test_stems_stay_inside_the_directory(tmp_path: Path, stem: str) -> None:
    with pytest.raises(OutputError):
        check_stem(stem)
    with pytest.raises(OutputError):
        write_set(tmp_path, stem, {".csv": _text("A")})
    assert list(tmp_path.iterdir()) == []


def test_output_dir_checks(tmp_path: Path) -> None:
    assert output_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="not a directory"):
        output_dir(tmp_path / "file")
    with pytest.raises(OutputError, match="cannot write there"):
        output_dir(tmp_path / "file" / "sub")
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(OutputError, match="cannot write there"):
            output_dir(locked)


def test_write_file_refuses_existing_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "x.csv"
    write_file(out, _text("one"))
    with pytest.raises(OutputError, match="--force"):
        write_file(out, _text("two"))
    assert out.read_text() == "one"
    write_file(out, _text("two"), force=True)
    assert out.read_text() == "two"
    with pytest.raises(OutputError, match="does not exist"):
        write_file(tmp_path / "nodir" / "x.csv", _text("x"))
    with pytest.raises(OutputError, match="is a directory"):
        write_file(tmp_path, _text("x"))


def test_write_file_force_replaces_the_symlink_not_its_target(tmp_path: Path) -> None:
    target = tmp_path / "target.csv"
    target.write_text("keep me")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    with pytest.raises(OutputError):
        write_file(link, _text("new"))
    write_file(link, _text("new"), force=True)
    assert target.read_text() == "keep me"
    assert not link.is_symlink() and link.read_text() == "new"


def _writer_process(out: str, marker: str, rounds: int) -> None:
    for _ in range(rounds):
        write_set(out, "same", {".json": _text(marker), ".png": _text(marker)})


def test_concurrent_sets_are_never_mixed(tmp_path: Path) -> None:
    """Four processes write 15 sets each under one stem: 60 complete sets, each one run's."""
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_writer_process, args=(str(tmp_path), m, 15))
             for m in "ABCD"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    jsons = sorted(tmp_path.glob("*.json"))
    assert len(jsons) == 60 and len(list(tmp_path.glob("*.png"))) == 60
    for j in jsons:
        assert j.with_suffix(".png").read_text() == j.read_text()
    counts = {m: sum(j.read_text() == m for j in jsons) for m in "ABCD"}
    assert counts == {m: 15 for m in "ABCD"}
    assert leftover_temps(tmp_path) == []
