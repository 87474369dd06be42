"""``FileStore``: sessions as JSON files in a folder, each with an OS lock and a
revision mark (SPEC R16, R22).

Session ``ID`` is the file ``ID.json``. Three files, because a file alone cannot say
whether it is the latest one:

* ``ID.json`` — the session, replaced atomically (temporary file, fsync, rename,
  fsync of the folder) on every write: the whole file, so a write costs what the
  session holds (the file store is for a few sessions on one machine; the database
  stores append, SPEC R22 addendum). A temporary file left by a writer killed
  mid-save is removed when a store is made or lists its sessions;
* ``ID.json.lock`` — the OS lock held while a process has the session open (the
  store's lease), so a second process gets ``SessionLockedError`` (a
  ``SessionConflictError``) at once; the kernel releases it when its holder dies;
* ``ID.json.rev`` — the highest revision this store wrote. A write is a
  compare-and-swap against it (and the file's own revision); a session file whose
  revision is *lower* is a restored older copy and is refused on load
  (``SessionIntegrityError``): an approval in it may already have been used.

What the file store cannot promise: the mark guards against the session file being put
back alone. Whoever restores (or deletes) both files together, or copies a session to
a new path, is not detected; without a ``secret`` anyone who can write the file can
change anything in it. The mark is written after the session file, atomically as the file
is (temporary file, rename): a crash can leave it behind the file (never ahead), so a
restore of the last revisions before the crash may go unnoticed. The lock is advisory, for processes
on one machine; network file systems may not honour it. For workers on many machines,
use ``PostgresStore``.
"""

from __future__ import annotations

import contextlib
import os
import re

from ..durable import FileLock, sweep_temporaries, write_atomically
from ..errors import SessionIntegrityError, SessionLockedError
from ..session import AgentSession, decode, file_identity
from .base import SessionStore, check_session_id, conflict

_HEAD_REVISION = re.compile(r'\A\{\s*"schema_version":\s*\d+,\s*"revision":\s*(\d+)[,}]')
_TEMPORARY = ".tmp"  # write_atomically's temporary files, never a session
_MARK_WIDTH = 20  # digits: every mark has one length, whatever the revision


class FileStore(SessionStore):
    """Sessions as ``ID.json`` files in ``directory`` (created if missing).

    Args:
        directory: the folder (str or path-like).
        secret: sign and check every file (HMAC-SHA256), as ``AgentSession.save``.
    """

    def __init__(self, directory, secret: str | bytes | None = None, suffix: str = ".json"):
        super().__init__(secret)
        self.directory = os.fspath(directory)
        self.suffix = suffix
        os.makedirs(self.directory, exist_ok=True)
        sweep_temporaries(self.directory)  # left by writers killed mid-save

    def __repr__(self) -> str:
        return f"FileStore({self.directory!r})"

    @classmethod
    def open_file(cls, path, secret: str | bytes | None = None):
        """``store.open`` for one file (what ``AgentSession.open`` does).

        Args:
            path: the session file (str or path-like); its folder must exist.
            secret: the signing key (str or bytes), or ``None``.

        Returns:
            a context manager yielding the ``AgentSession``, as ``open``.

        Raises:
            FileNotFoundError: the folder of ``path`` does not exist.
        """
        path = os.path.abspath(os.fspath(path))
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"cannot open the session {path}: the folder {folder} "
                                    "does not exist")
        return cls(folder, secret, suffix="").open(os.path.basename(path))

    def identity(self, session_id: str) -> str:
        """What a signed session's signature binds it to (SPEC R24): its file.

        Args:
            session_id: the session's id (str).

        Returns:
            str: ``file:`` and the absolute path of its file (``file_identity``).
        """
        return file_identity(self.path(session_id))

    def path(self, session_id: str) -> str:
        """The file that holds a session.

        Args:
            session_id: the session's id (str, see ``check_session_id``).

        Returns:
            str: the path, ``directory/session_id + suffix``.
        """
        return os.path.join(self.directory, check_session_id(session_id) + self.suffix)

    # -- the primitives ------------------------------------------------------------------

    def _fetch(self, session_id: str) -> tuple[int, str] | None:
        path = self.path(session_id)
        mark = _read_mark(path)  # before the file: see _refuse_rollback
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except FileNotFoundError:
            return None
        revision = _revision_in(text, path, self.secret)
        _refuse_rollback(path, revision, mark)
        return revision, text

    def _decode(self, session_id: str, revision: int, text: str) -> AgentSession:
        path = self.path(session_id)
        return decode(text, path, self.secret, file_identity(path))

    def _swap(self, session_id: str, expected: int, text: str, waiting) -> None:
        path = self.path(session_id)  # the caller holds the lock: compare, then write
        held = max(_read_mark(path), _file_revision(path, self.secret))
        if held != expected:
            raise conflict(session_id, expected, held)
        write_atomically(path, text)
        _write_mark(path, expected + 1)

    def _ids(self):  # every session: a folder has no index to ask
        sweep_temporaries(self.directory)
        for name in sorted(os.listdir(self.directory)):
            if name.endswith(self.suffix) and not name.endswith(_TEMPORARY):
                yield name[:len(name) - len(self.suffix)]

    def _remove(self, session_id: str) -> None:
        path = self.path(session_id)
        for name in (path, path + ".rev"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)

    def _acquire(self, session_id: str):
        return os_lease(self.path(session_id) + ".lock")

    def _in_use(self, session_id: str, subject=None, who="") -> SessionLockedError:
        path = self.path(session_id)
        return super()._in_use(session_id, path, f"another process (it holds {path}.lock)")


def os_lease(path: str):
    """A store's lease as an OS lock on the file ``path`` (``SessionStore._acquire``),
    which the kernel drops when the holder dies, SIGKILL included.

    Args:
        path: the lock file (str); its folder must exist.

    Returns:
        the function that releases it, or ``None`` when another holder has it.
    """
    lock = FileLock(path)
    return lock.release if lock.acquire() else None


def read_file(path: str, secret) -> AgentSession:
    """``AgentSession.load``: the session in a file, refused when older than the
    revision mark beside it (a restored copy, SPEC R22).

    Args:
        path: the file (str).
        secret: the signing key (str or bytes), or ``None``.

    Returns:
        AgentSession: the session.

    Raises:
        OSError, SessionError: as ``AgentSession.load``.
    """
    mark = _read_mark(path)
    with open(path, encoding="utf-8") as handle:
        session = decode(handle.read(), path, secret, file_identity(path))
    _refuse_rollback(path, session.revision, mark)
    return session


def _refuse_rollback(path: str, revision: int, mark: int) -> None:
    """Refuse a file older than the mark read *before* it: a writer replaces the file
    first and the mark after, so a mark read first is never ahead of the file a
    concurrent write leaves, and only a real restore is refused (SPEC R22)."""
    if revision < mark:
        raise SessionIntegrityError(
            f"{path} holds revision {revision}, but revision {mark} of it was written "
            f"before ({path}.rev): the file was put back from an older copy, and an "
            "approval in it may already have been used. Refusing it (SPEC R22). If you "
            f"really mean to go back to this copy, delete {path}.rev first.")


def _revision_in(text: str, path: str, secret) -> int:
    match = _HEAD_REVISION.match(text)
    if match:
        return int(match.group(1))
    return decode(text, path, secret, file_identity(path)).revision  # not by encode()


def _file_revision(path: str, secret) -> int:
    try:
        with open(path, encoding="utf-8") as handle:
            match = _HEAD_REVISION.match(handle.read(200))
            if match:
                return int(match.group(1))
            handle.seek(0)
            return _revision_in(handle.read(), path, secret)
    except FileNotFoundError:
        return 0


def _read_mark(path: str) -> int:
    try:
        with open(path + ".rev", encoding="ascii") as handle:
            text = handle.read().strip()
    except FileNotFoundError:
        return 0
    if not text:  # made and never written: an older version killed between the two
        return 0
    if not text.isdigit():
        raise SessionIntegrityError(f"{path}.rev should hold the session's highest revision, "
                                    f"but holds {text[:40]!r}; restore or delete it")
    return int(text)


def _write_mark(path: str, revision: int) -> None:
    # Written whole and renamed into place, as the session is: a kill between making
    # the file and writing it cannot leave an empty mark (issue 38).
    write_atomically(path + ".rev", f"{revision:0{_MARK_WIDTH}d}\n")
