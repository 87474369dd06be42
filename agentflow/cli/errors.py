"""The command line's own exceptions: a usage mistake and the person quitting the prompt.

They belong to ``agentflow``, the command, not to the library: nothing outside ``cli/``
raises or catches them. Both are ``AgentflowError`` subclasses, so the command's one
error handler words them as it words the library's errors.
"""

from __future__ import annotations

from ..errors import AgentflowError


class UsageError(AgentflowError, ValueError):
    """The ``agentflow`` command line asks for something impossible: a flag's value,
    a file it names, a combination of flags (the command exits with status 2)."""


class Quit(AgentflowError):
    """The person chose q at ``agentflow chat``'s approval prompt, or ended its input:
    the chat stops and the call stays pending. Not an error; it never leaves the
    command."""
