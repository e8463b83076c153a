"""Writing results safely (docs/guarantees.md): every file under its output directory, written
whole or not at all, never through a symlink, never over an existing result.

- :func:`output_dir` checks (and creates) an output directory before any work is done, so an
  unusable path is refused before a long solve rather than after it;
- :func:`write_set` writes the files of one result (e.g. ``NAME.json`` and ``NAME.png``) to
  temporary files in the directory, then gives them their names together under the first
  free stem ``NAME``, ``NAME-2``, ``NAME-3``, ... : a name is claimed with a hard link (or an
  exclusive create), which fails rather than replace an existing file, so two runs never
  overwrite each other and never mix their files;
- :func:`write_file` writes one file at a path the user named (``export --output``),
  atomically (temporary file + ``os.replace``), refusing an existing file unless asked to
  replace it — and then the symlink itself is replaced, not the file it points to.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from cpsched.instance.checks import safe_name

#: Writes one file at the given path.
Writer = Callable[[Path], None]

#: How many ``NAME-k`` stems are tried before giving up.
MAX_SUFFIX = 10_000

_NO_HARD_LINKS = {errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOSYS, errno.EOPNOTSUPP,
                  errno.ENOTSUP}


class OutputError(ValueError):
    """An output path cannot be used; the message names the path and why."""


def output_dir(out: str | Path, option: str = "--out") -> Path:
    """The output directory ``out``, created with its parents and checked writable.

    Raises:
        OutputError: ``out`` is a file, cannot be created, or cannot be written to.
    """
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{option} {out}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".cpsched-probe-", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(f"{option} {out}: cannot write there ({exc.strerror or exc})"
                          ) from None
    return path


def check_stem(stem: str, option: str = "--stem") -> str:
    """``stem`` if it is a safe file name (the rule of instance names: no path separator,
    no control character, not ``.``/``..``, at most 100 characters), so that files named
    from it stay in their directory.

    Raises:
        OutputError: naming the rule.
    """
    try:
        return safe_name(stem)
    except ValueError as exc:
        raise OutputError(f"{option} = {stem!r}: {exc} (it names files inside the output "
                          "directory)") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def temp_file(out: Path, stem: str, suffix: str) -> Path:
    """An empty hidden temporary file in ``out`` ending in ``suffix``, with the
    permissions a new file gets (``mkstemp`` makes it private); :func:`leftover_temps`
    finds it if it is left behind."""
    fd, name = tempfile.mkstemp(dir=out, prefix=f".{stem[:40]}.", suffix=f".tmp{suffix}")
    os.close(fd)
    os.chmod(name, 0o666 & ~_umask())
    return Path(name)


def _write_temp(out: Path, stem: str, suffix: str, writer: Writer, temps: list[Path]) -> Path:
    """Write one file to a new temporary file (recorded in ``temps``), flushed to disk."""
    tmp = temp_file(out, stem, suffix)
    temps.append(tmp)
    writer(tmp)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return tmp


def _claim(src: Path, dst: Path) -> None:
    """Give ``src``'s content the name ``dst`` unless ``dst`` exists (even as a dangling
    symlink).

    Raises:
        FileExistsError: ``dst`` exists.
    """
    try:
        os.link(src, dst, follow_symlinks=False)
        return
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
    # no hard links here: reserve the name exclusively, then move the file onto it
    os.close(os.open(dst, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    os.replace(src, dst)


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _claim_set(out: Path, stem: str, temps: Mapping[str, Path]) -> list[Path]:
    """Name the temporary files ``OUT/STEM-k{suffix}`` for the first ``k`` whose names are
    all free; a name taken meanwhile by another run moves this one to the next ``k``."""
    for k in range(1, MAX_SUFFIX + 1):
        cand = stem if k == 1 else f"{stem}-{k}"
        finals = {suf: out / f"{cand}{suf}" for suf in temps}
        if any(os.path.lexists(f) for f in finals.values()):
            continue
        claimed: list[Path] = []
        try:
            for suf, final in finals.items():
                _claim(temps[suf], final)
                claimed.append(final)
        except FileExistsError:
            for f in claimed:
                _unlink(f)
            continue
        return list(finals.values())
    raise OutputError(f"{out}: {MAX_SUFFIX} results named {stem} already; use another "
                      "--out directory")


def write_set(out: str | Path, stem: str, files: Mapping[str, Writer]) -> list[Path]:
    """Write one result's files ``OUT/STEM{suffix}`` (``files``: ``{suffix: writer}``, e.g.
    ``{".json": ..., ".png": ...}``) together and never over an existing file: when any of
    the names is taken, the set goes to ``STEM-2``, ``STEM-3``, ... instead.

    Each file is written to a temporary file in ``out`` first (``writer(path)``), so a file
    under its final name is always complete; the temporary files are removed whatever
    happens (errors, Ctrl-C).

    Returns:
        The paths written, in the order of ``files``.

    Raises:
        OutputError: ``stem`` is not a safe file name, or no free stem was found.
        OSError: a file cannot be written.
    """
    base = Path(out)
    check_stem(stem)
    temps: list[Path] = []
    try:
        by_suffix = {suf: _write_temp(base, stem, suf, writer, temps)
                     for suf, writer in files.items()}
        return _claim_set(base, stem, by_suffix)
    finally:
        for t in temps:
            _unlink(t)


def write_file(path: str | Path, writer: Writer, *, force: bool = False,
               option: str = "--output") -> Path:
    """Write one file at a path the user chose, atomically (temporary file in the same
    directory, then rename).

    An existing ``path`` is refused unless ``force``; with ``force`` it is replaced — a
    symlink itself is replaced, never the file it points to.

    Raises:
        OutputError: the directory is missing, ``path`` is a directory, or it exists
            without ``force``.
        OSError: the file cannot be written.
    """
    p = Path(path)
    parent = p.parent
    if not parent.is_dir():
        raise OutputError(f"{option} {path}: the directory {str(parent)!r} does not exist")
    if p.is_dir():
        raise OutputError(f"{option} {path}: is a directory; give a file name")
    if os.path.lexists(p) and not force:
        raise OutputError(f"{option} {path}: exists; use --force to replace it")
    temps: list[Path] = []
    try:
        tmp = _write_temp(parent, p.name, p.suffix, writer, temps)
        if force:
            os.replace(tmp, p)
        else:
            try:
                _claim(tmp, p)
            except FileExistsError:
                raise OutputError(f"{option} {path}: exists; use --force to replace it"
                                  ) from None
    finally:
        for t in temps:
            _unlink(t)
    return p


def leftover_temps(out: str | Path) -> list[Path]:
    """Temporary files of :func:`write_set` / :func:`write_file` left in ``out`` (only a
    killed process leaves any)."""
    return sorted(q for q in Path(out).glob(".*") if ".tmp" in q.name)


__all__ = ["MAX_SUFFIX", "OutputError", "Writer", "check_stem", "leftover_temps", "output_dir",
           "temp_file", "write_file", "write_set"]
