"""The key that signs a session store, and the files a sandboxed command must not
change (issue 37, SPEC R27).

A store the command line writes (``agentflow chat --store``) is signed: every row
carries an HMAC under the store's own key (``agentflow.stores.rows``), so an answer,
an edit or a waiting call that anything else wrote (a sandboxed command that opened
``sessions.db``) fails verification where it is read, and the worker and the inbox
refuse it, naming the session. The key is one file, given to every process that
serves the store (chat, worker, inbox, pending), on any machine:
``--store-key FILE`` or ``AGENTFLOW_STORE_KEY_FILE``; on one machine it defaults to
``store.key`` in agentflow's configuration folder, made once (mode 0600), apart from
``settings.key``, which signs remembered settings. A given key file that cannot be
read stops the process, saying so.

A store is signed or not as a whole. An application's store (as
``examples/approval_service.py`` writes it, without a secret) is served only with
``--unsigned``, which says what that means.
"""

from __future__ import annotations

import os
import sys

from .errors import UsageError

ENV = "AGENTFLOW_STORE_KEY_FILE"
MIN_KEY = 32  # bytes


def add_arguments(parser) -> None:
    """Add ``--store-key FILE`` and ``--unsigned`` to a parser.

    Args:
        parser: an ``argparse.ArgumentParser``.
    """
    parser.add_argument("--store-key", metavar="FILE",
                        help=f"the key the --store is signed with (default: ${ENV}, else "
                             "store.key in agentflow's configuration folder, made once); "
                             "give the same file to chat, worker, inbox and pending")
    parser.add_argument("--unsigned", action="store_true",
                        help="the --store is not signed (an application's own store): "
                             "anything that can write it can forge answers")


def key_path(args) -> str:
    """The key file for this process's store.

    Args:
        args: the ``argparse.Namespace`` (its ``store_key``, if any).

    Returns:
        str: ``--store-key``, else ``$AGENTFLOW_STORE_KEY_FILE``, else ``store.key``
        in the configuration folder (absolute).
    """
    from .trust import config_dir
    given = getattr(args, "store_key", None) or os.environ.get(ENV)
    return os.path.abspath(given) if given else os.path.join(config_dir(), "store.key")


def store_secret(args, command: str) -> bytes | None:
    """The key a store is opened with (``open_store(url, secret)``).

    Args:
        args: the ``argparse.Namespace`` (``store_key``, ``unsigned``).
        command: the subcommand (str), for the note ``--unsigned`` prints.

    Returns:
        bytes | None: the key; ``None`` with ``--unsigned`` (after a note on stderr
        saying what serving an unsigned store means).

    Raises:
        UsageError: a key file given by flag or variable cannot be read, or is shorter
            than 32 bytes; or the default one cannot be made.
    """
    if getattr(args, "unsigned", False):
        print(f"agentflow {command}: note: --unsigned: the store's sessions are not signed, "
              "so any program that can write the store can forge an answer, an edit or a "
              "waiting call, and this process would act on it; serve a store so only when "
              "nothing an agent runs can write it", file=sys.stderr)
        return None
    path = key_path(args)
    given = getattr(args, "store_key", None) or os.environ.get(ENV)
    try:
        if not given:
            from .trust import made_key
            return made_key(path)
        with open(path, "rb") as handle:
            key = handle.read()  # as it is: the default key is raw bytes too
    except OSError as exc:
        source = "--store-key" if getattr(args, "store_key", None) else f"${ENV}"
        raise UsageError(f"{source} {path}: cannot read the store's key ({exc.strerror}); "
                         "give the key file the store was signed with to every process "
                         "that serves it, or --unsigned for a store that is not signed"
                         ) from None
    if len(key) < MIN_KEY:
        raise UsageError(f"the store key {path} holds {len(key)} bytes; a key has at least "
                         f"{MIN_KEY} (e.g. head -c 32 /dev/urandom > {path})")
    return key


def store_files(url: str) -> list[str]:
    """The files of a store that decide what later runs, for the sandbox to keep
    read-only (SPEC R27): a SQLite store's folder (its ``-wal``, ``-shm`` and
    ``-journal`` siblings come and go there), a FileStore's folder; nothing for
    PostgreSQL.

    Args:
        url: the store URL (str), as for ``open_store``.

    Returns:
        list[str]: absolute paths.
    """
    scheme, _, rest = url.partition("://")
    if scheme == "sqlite":
        path = rest[1:] if rest.startswith("/") else rest
        return [os.path.dirname(os.path.abspath(path)) or "/"]
    if scheme == "file":
        return [os.path.abspath(rest)]
    return []


def decisive_files(args) -> dict:
    """What a chat's sandbox keeps read-only and hides (SPEC R27), as ``Sandbox``
    arguments.

    Args:
        args: the ``agentflow chat`` ``argparse.Namespace``.

    Returns:
        dict: ``protected``: the store's files (``store_files``); ``read_only``: the
        ``--session`` file, the ``--policy`` file; ``hidden``: the store's key file.
    """
    store = getattr(args, "store", None)
    read_only = [os.path.abspath(path) for path in (
        None if store else getattr(args, "session", None), getattr(args, "policy", None))
        if path]
    return {"protected": tuple(store_files(store) if store else ()),
            "read_only": tuple(read_only), "hidden": (key_path(args),) if store else ()}


def key_flags(args) -> list[str]:
    """The flags that gave this process its key, for a command it suggests.

    Args:
        args: the ``argparse.Namespace``.

    Returns:
        list[str]: ``["--unsigned"]``, ``["--store-key", FILE]``, or ``[]`` (the
        default key, or the variable, which the suggested command inherits).
    """
    if getattr(args, "unsigned", False):
        return ["--unsigned"]
    return ["--store-key", args.store_key] if getattr(args, "store_key", None) else []
