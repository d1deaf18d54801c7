"""The one writer of output files: every command that writes a file (``--out`` of export, report and
init, the demo's config) goes through it.

``check(path)`` refuses (:class:`OutputRefused`, exit 2) a target that is the warehouse or its
``.wal`` (also through a symlink, a hard link or a relative path), a directory, a device, a FIFO or a
socket: writing there would destroy data or replace what is not a file with one. ``replacing(path)``
yields a temporary name beside the real target (a symlink is written through); the caller writes it,
and it is renamed over the target only when the block completes. The temporary file is removed on
every other exit: an exception, or SIGTERM (then the process still ends by that signal). One left by
a process that died harder (``kill -9``, power loss) is swept by the next write to the same target.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

_PROTECTED: list[tuple[str, str]] = []  # (what it is, its real path)
_PENDING: set[Path] = set()  # temporary files being written by this process


class OutputRefused(ValueError):
    """An output path that must not be written: the CLI exits 2 with this sentence."""


def protect(warehouse: str | os.PathLike) -> None:
    """Name the warehouse (the config's, after loading it): it and its write-ahead log are never output."""
    real = os.path.realpath(warehouse)
    _PROTECTED[:] = [("the warehouse", real), ("the warehouse's write-ahead log", real + ".wal")]


def _kind(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def check(path: str | os.PathLike, *, flag: str = "--out", make_parents: bool = False) -> Path:
    """The real file ``path`` names (symlinks resolved), or OutputRefused saying why it may not be written."""
    given = os.fspath(path)
    real = Path(os.path.realpath(given))
    try:
        st: os.stat_result | None = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputRefused(f"{flag} {given}: can not be examined ({exc.strerror or exc})") from None
    for what, protected in _PROTECTED:
        same = str(real) == protected
        if not same and st is not None:
            with contextlib.suppress(OSError):
                same = os.path.samefile(real, protected)  # a hard link to it
        if same:
            raise OutputRefused(f"{flag} {given}: is {what} ({protected}); writing there would destroy it")
    if st is not None and (kind := _kind(st.st_mode)):
        raise OutputRefused(f"{flag} {given}: is {kind}, not a regular file (give the path of a file to write)")
    if real.parent.exists() and not real.parent.is_dir():
        raise OutputRefused(f"{flag} {given}: {real.parent} is not a folder")
    if not real.parent.exists() and not make_parents:
        raise OutputRefused(f"{flag} {given}: folder {real.parent} does not exist")
    return real


def _temp_name(target: Path, pid: int) -> Path:
    return target.with_name(f".{target.name}.{pid}.tmp")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def sweep(target: Path) -> list[Path]:
    """Remove the temporary files of ``target`` that processes no longer running left behind."""
    pattern = re.compile(rf"^\.{re.escape(target.name)}\.(\d+)\.tmp$")
    removed = []
    with contextlib.suppress(OSError):
        for entry in target.parent.iterdir():
            m = pattern.match(entry.name)
            if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
                with contextlib.suppress(FileNotFoundError):
                    entry.unlink()
                    removed.append(entry)
    return removed


def _on_sigterm(signum, frame) -> None:  # pragma: no cover - exercised in a subprocess
    for tmp in list(_PENDING):
        with contextlib.suppress(OSError):
            tmp.unlink()
    previous = _PREVIOUS.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)  # end as SIGTERM would have ended us


_PREVIOUS: dict[int, object] = {}


@contextlib.contextmanager
def _removed_on_sigterm(tmp: Path) -> Iterator[None]:
    main = threading.current_thread() is threading.main_thread()
    install = main and not _PENDING
    if install:
        _PREVIOUS[signal.SIGTERM] = signal.signal(signal.SIGTERM, _on_sigterm)
    _PENDING.add(tmp)
    try:
        yield
    finally:
        _PENDING.discard(tmp)
        if install:
            signal.signal(signal.SIGTERM, _PREVIOUS.pop(signal.SIGTERM))  # type: ignore[arg-type]


@contextlib.contextmanager
def replacing(path: str | os.PathLike, *, flag: str = "--out", make_parents: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path``'s real file; renamed over it when the block completes, removed otherwise."""
    target = check(path, flag=flag, make_parents=make_parents)
    if make_parents:
        target.parent.mkdir(parents=True, exist_ok=True)
    sweep(target)
    tmp = _temp_name(target, os.getpid())
    with _removed_on_sigterm(tmp):
        try:
            yield tmp
            check(path, flag=flag)  # nothing took the target's place meanwhile
            with contextlib.suppress(FileNotFoundError):
                os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))  # an existing file keeps its mode
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def write_text(path: str | os.PathLike, text: str, *, flag: str = "--out", make_parents: bool = False) -> Path:
    """``text`` (UTF-8) to ``path`` through :func:`replacing`; the real path written."""
    return write_bytes(path, text.encode("utf-8"), flag=flag, make_parents=make_parents)


def write_bytes(path: str | os.PathLike, data: bytes, *, flag: str = "--out", make_parents: bool = False) -> Path:
    with replacing(path, flag=flag, make_parents=make_parents) as tmp:
        tmp.write_bytes(data)
    return Path(os.path.realpath(path))
