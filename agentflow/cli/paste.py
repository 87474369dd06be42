"""Commands agentflow prints for a person to paste (SPEC R25): every word shell-quoted,
and no secret in them: a store URL's password is left out, and the line says where
libpq finds it instead."""

from __future__ import annotations

import shlex
from urllib.parse import urlsplit

PASSWORD_NOTE = ("(the store's password is left out of this command: libpq reads "
                 "PGPASSWORD or ~/.pgpass)")


def command(*words: str) -> str:
    """A command line that the shell reads back as exactly ``words``.

    Args:
        *words: the words (str), e.g. ``"agentflow", "chat", "--session", path``.

    Returns:
        str: the words, each quoted where the shell would read it otherwise.
    """
    return " ".join(shlex.quote(word) for word in words)


def without_password(url: str) -> tuple[str, bool]:
    """A store URL with its password left out (SPEC R25: a printed command holds no
    secret).

    Args:
        url: the store URL (str).

    Returns:
        tuple: ``(url, had_password)``: the URL without ``:password`` (str), and
        whether there was one (bool).
    """
    parts = urlsplit(url)
    if parts.password is None:
        return url, False
    user, _, host = parts.netloc.rpartition("@")
    return parts._replace(netloc=f"{user.partition(':')[0]}@{host}").geturl(), True
