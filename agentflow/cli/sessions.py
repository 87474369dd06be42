"""Opening the chat's session: a ``--session`` file (locked) or a session in a
``--store``, and why a file could not be opened, in words a CLI user can act on."""

from __future__ import annotations

import json
import shlex

from ..session import SCHEMA_VERSION, AgentSession, SessionError, SessionLockedError
from ..errors import AgentflowError
from .errors import UsageError


def open_session(args, stack) -> AgentSession:
    """The session this chat keeps its conversation in, closed when ``stack`` closes.

    Args:
        args: the ``argparse.Namespace`` of ``agentflow chat``.
        stack: a ``contextlib.ExitStack`` that unlocks and closes what is opened.

    Returns:
        AgentSession: from the store, from the file, or a new one kept in memory.

    Raises:
        UsageError: the ``--session`` file is not a usable session.
        SessionLockedError: another process holds the session.
        AgentflowError, OSError: the store could not be opened.
    """
    if args.store:
        from ..stores import open_store
        from .store_key import store_secret
        secret = store_secret(args, "chat")  # SPEC R27: a forged row is refused
        try:
            store = stack.enter_context(open_store(args.store, secret))
        except ValueError as exc:  # not a store URL: the flag's value is wrong
            if isinstance(exc, AgentflowError):
                raise
            raise UsageError(f"--store: {exc}") from None
        return stack.enter_context(store.open(args.session))
    if args.session:
        try:
            return stack.enter_context(AgentSession.open(args.session))
        except SessionLockedError:
            raise
        except (ValueError, SessionError) as exc:
            raise UsageError(session_problem(args.session, exc)) from None
    return AgentSession()


def session_problem(path: str, error: Exception) -> str:
    """Why ``path`` could not be opened as a session, in words a CLI user can act on.

    Args:
        path: the ``--session`` file (str).
        error: what ``AgentSession.open`` raised.

    Returns:
        str: the message, saying what to do.
    """
    start = f"--session {path}"
    fresh = "give another file name to start a new session (this file is left as it is)"
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        return f"{start}: cannot read it ({exc.strerror})"
    if not raw.strip():
        return (f"{start} is empty, not a saved session: delete it (rm {shlex.quote(path)}) "
                "to start a new session there, or give another file")
    try:
        data = json.loads(raw)
    except ValueError:
        return f"{start} is not a saved session (it is not JSON); {fresh}"
    version = data.get("schema_version") if isinstance(data, dict) else None
    if isinstance(data, dict) and "signature" in data:
        return (f"{start} is signed (saved with AgentSession.open(..., secret=...)), and "
                f"agentflow chat opens unsigned sessions only; {fresh}")
    if version is None:
        return (f"{start} is not a saved session (JSON without a schema_version, so not "
                f"written by agentflow); {fresh}")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        return (f"{start} was written by a newer agentflow (schema_version {version}; this "
                f"one reads up to {SCHEMA_VERSION}): upgrade agentflow "
                "(pip install -U . in a checkout of agentflow-approvals), or " + fresh)
    detail = str(error).removeprefix(f"{path} is not a saved session: ")
    return f"{start} is not a usable session ({detail}); {fresh}"
