"""What survives a crash: the atomic file write and the OS lock (SPEC R10, R16, R22).

The session files, the file and SQLite stores, policy files and the command line's trust
file use it: one write that a crash cannot tear, for every file agentflow keeps.

``write_atomically`` replaces a file so that a crash, a kill or a power loss leaves the
old content or the new, never half of one: a temporary file in the same folder,
fsync, rename, fsync of the folder. The temporary file is locked while it is written,
so ``sweep_temporaries`` can tell the leftover of a writer that died (its lock is gone)
from a write in progress, and remove it.

``FileLock`` is an exclusive, non-blocking OS lock (``flock``; ``msvcrt.locking`` on
Windows) on a lock file held open by this process: the kernel drops it when the
process dies, SIGKILL included. The lock file exists only while held.
"""

from __future__ import annotations

import contextlib
import os
import time

_TEMP_SUFFIX = ".tmp"
_STALE_AFTER = 60.0  # seconds: a temporary file younger than this may be just made


def write_atomically(path: str, text: str, prefix: str = ".session-") -> None:
    """Replace a file atomically: a temporary file ``<prefix>*.tmp`` in the same
    folder, fsync, rename, fsync of the folder (SPEC R16).

    Args:
        path: the file (str); its folder must exist.
        text: the new content (str), written as UTF-8.
        prefix: the temporary file's name prefix (str), for ``sweep_temporaries``.

    Raises:
        OSError: writing or renaming failed; the temporary file is removed and the
            old file left as it was.
    """
    import tempfile
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=_TEMP_SUFFIX, dir=folder)
    try:
        _lock(fd)  # so that a sweep leaves a write in progress alone
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # not every system can open a folder
        folder_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(folder_fd)
        finally:
            os.close(folder_fd)


def sweep_temporaries(folder: str, prefix: str = ".session-",
                      older_than: float = _STALE_AFTER) -> int:
    """Remove the temporary files of writers that died mid-write (SPEC R22 addendum):
    ``<prefix>*.tmp`` files in ``folder`` older than ``older_than`` seconds whose lock
    no live writer holds.

    Args:
        folder: the folder (str).
        prefix: the temporary files' name prefix (str).
        older_than: seconds (float) since the file was last written.

    Returns:
        int: how many were removed.
    """
    removed, now = 0, time.time()
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for name in names:
        if not (name.startswith(prefix) and name.endswith(_TEMP_SUFFIX)):
            continue
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            continue
        try:
            if now - os.fstat(fd).st_mtime < older_than:
                continue
            try:
                _lock(fd)
            except OSError:
                continue  # its writer is alive
            os.unlink(path)
            removed += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


class FileLock:
    """An exclusive, non-blocking OS lock on the file ``path``, taken by ``acquire``
    and given back by ``release``.

    The lock file exists only while it is held: ``release`` removes it (while still
    locked), so no stray ``*.lock`` is left. A process that locked a file just removed
    by another tries again on the new one.

    Args:
        path: the lock file (str); its folder must exist.
    """

    def __init__(self, path: str):
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock without waiting.

        Returns:
            bool: ``True`` when this object now holds it, ``False`` when another
            holder has it.

        Raises:
            FileNotFoundError: the lock file's folder does not exist.
            RuntimeError: this object holds it already.
        """
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already locked by this FileLock")
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                _lock(fd)
            except OSError:
                os.close(fd)
                return False
            try:
                current = os.stat(self.path)
            except FileNotFoundError:
                current = None
            if current is not None and os.path.samestat(current, os.fstat(fd)):
                self._fd = fd
                return True
            _unlock(fd)  # removed by its last holder after we opened it
            os.close(fd)

    def release(self) -> None:
        """Give the lock back and remove the lock file; nothing when not held."""
        if self._fd is not None:
            with contextlib.suppress(OSError):  # Windows cannot remove an open file
                os.unlink(self.path)
            _unlock(self._fd)
            os.close(self._fd)
            self._fd = None


try:
    import fcntl

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
except ImportError:  # Windows
    import msvcrt

    def _lock(fd: int) -> None:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)

    def _unlock(fd: int) -> None:
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
