"""The environment ``run_command`` gives a command: agentflow's own, without secrets
(issue 37, SPEC R27).

Removing only the API key's variable left every other secret to the commands
(``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, a database URL) and to ``env``, ``set``,
``export -p`` and ``make -p``, which print them. So, as Codex's shell environment
policy does by default, a variable is left out when its name holds one of
``SECRET_WORDS`` (ignoring case) or its value is a URL with a password in it
(``postgresql://user:PASSWORD@host/db``) or a ``password=…`` (``jdbc:…?password=…``,
``host=db password=…``). Two lists of name patterns (``fnmatch``
syntax, ignoring case) change that, from a policy's ``sandbox`` settings:
``env_exclude`` leaves out more, ``env_include`` lets a variable through that the rule
would leave out. The API key's variables are always left out, whatever the lists say.
"""

from __future__ import annotations

import fnmatch
import re

SECRET_WORDS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
# scheme://user:password@ — the password part is what a command must not get
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s@:]*:[^/?#\s@]+@")
# password=… as a URL's query or a keyword DSN gives it (jdbc:…?user=u&password=…,
# libpq's "host=db password=…", ODBC's ";Pwd=…")
_KEYED_PASSWORD = re.compile(r"(?:^|[?&;\s])(?:password|passwd|pwd|pass)=[^&;\s]+",
                             re.IGNORECASE)


def _matches(name: str, patterns) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, p.upper()) for p in patterns)


def secret_variable(name: str, value: str) -> bool:
    """Whether a variable is a secret by the default rule.

    Args:
        name: the variable's name (str).
        value: its value (str).

    Returns:
        bool: its name holds one of ``SECRET_WORDS`` (ignoring case), or its value
        holds a URL with a password or a ``password=…`` (a query, a keyword DSN).
    """
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS) or bool(
        _URL_PASSWORD.search(value) or _KEYED_PASSWORD.search(value))


def command_environment(environ, include=(), exclude=(), always=()) -> tuple[dict, dict]:
    """Split an environment into what a command gets and what it does not.

    Args:
        environ: the environment (a mapping of str to str, e.g. ``os.environ``).
        include: name patterns (iterable of str, ``fnmatch``, ignoring case) let
            through although the default rule leaves them out (``env_include``).
        exclude: name patterns left out although the default rule keeps them
            (``env_exclude``).
        always: names (iterable of str) always left out: the API key's variables
            (SPEC R26).

    Returns:
        tuple: ``(kept, removed)``, two dicts of name to value.
    """
    never = set(always)
    kept, removed = {}, {}
    for name, value in environ.items():
        out = name in never or _matches(name, exclude) or (
            secret_variable(name, value) and not _matches(name, include))
        (removed if out else kept)[name] = value
    return kept, removed


def masked_values(removed: dict) -> list[str]:
    """The values of left-out variables that a result must not carry (a command
    outside the sandbox can still read agentflow's own environment): those that look
    like a secret, not a name or a path (``GIT_AUTHOR_NAME``, ``XAUTHORITY``).

    Args:
        removed: the second dict ``command_environment`` returns.

    Returns:
        list[str]: values of 8 or more characters without whitespace that are not
        absolute paths.
    """
    return [v for v in removed.values()
            if len(v) >= 8 and not any(c.isspace() for c in v) and not v.startswith("/")]
