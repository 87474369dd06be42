"""The exceptions agentflow raises, all of them. Every one says what went wrong and
what to do, and carries what a program needs as attributes, so that no caller (the
command line included) has to read the English.

None of them ever carries the API key: provider messages are scrubbed of it before
they are stored (SPEC §6, last item). The tree::

    AgentflowError
    ├── ProviderError                   the model provider failed (status_code, code, message)
    │   ├── BadRequestError             HTTP 400 (and other 4xx without their own class)
    │   ├── AuthenticationError         HTTP 401, or no key for an endpoint that needs one
    │   ├── PermissionDeniedError       HTTP 403
    │   ├── NotFoundError               HTTP 404 (a model or URL the server lacks)
    │   ├── ConflictError               HTTP 409
    │   ├── UnprocessableEntityError    HTTP 422
    │   ├── RateLimitError              HTTP 429 (retry_after: what the server asked)
    │   ├── InternalServerError         HTTP 5xx
    │   ├── ProviderTimeoutError        silent for longer than a timeout
    │   └── IncompleteStreamError       the stream ended before the turn did
    ├── ApprovalError                   answers that do not fit the pause (call_ids)
    ├── SessionError                    a saved session cannot be used as it is
    │   ├── SessionIntegrityError       signature wrong, missing or unexpected; a restored copy
    │   ├── SessionConflictError        another worker wrote it first (revision)
    │   │   └── SessionLockedError      another live worker has it open
    │   └── StoreError                  the store's database or folder failed (store)
    ├── PolicyError (also ValueError)   a policy file or rule that cannot be used
    ├── UnreadableCommandLine           the shell reader cannot read a line (opaque)
    ├── LoopStateError                  an illegal move of the tool loop (a bug)
    ├── ResultConversionError           a tool ran; its result cannot become text
    ├── MCPError                        an MCP server failed (server)
    │   ├── MCPTimeoutError             a tool call timed out
    │   └── MCPToolError                the tool reported a failure
    └── SandboxError                    a required sandbox cannot start (bwrap)

The command line adds its own two (``agentflow.cli.errors``): ``UsageError`` (also
``ValueError``, a flag that asks for something impossible) and ``Quit`` (q at the prompt).

A message that tells the caller to check or change one of their settings names it as a
``Setting``, not as words: ``str(error)`` says ``base_url`` or ``read_timeout=120 s`` (the
library's arguments), and ``error.worded(wording)`` says it as a front end's own
``Wording`` does (the command line: ``--base-url``, ``120 s``), so rewording a message
never silently changes what the command shows.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    """A caller's setting that a message names (see the module docstring).

    Attributes:
        name: the library's argument (str): ``base_url``, ``read_timeout``,
            ``connect_timeout``, or ``session`` (resume with the session that paused).
        seconds: its value when the message gives it as a time limit (float), else
            ``None``.
    """

    name: str
    seconds: float | None = None


class Wording:
    """How messages name the caller's settings: the library's own words. A front end
    subclasses it and passes it to ``AgentflowError.worded``."""

    def word(self, setting: Setting) -> str:
        """The words for one setting.

        Args:
            setting: the ``Setting``.

        Returns:
            str: ``read_timeout=120 s`` for a limit, ``base_url`` for a name, and for
            ``session`` the instruction to resume with the session that paused.
        """
        if setting.name == "session":
            return "resume with the same AgentSession the run paused in"
        if setting.seconds is not None:
            return f"{setting.name}={setting.seconds} s"
        return setting.name


class AgentflowError(Exception):
    """Base class of every error raised by agentflow.

    Attributes:
        parts: the message as text (str) and ``Setting`` pieces, when it names a
            setting; empty otherwise.
    """

    parts: tuple = ()

    @classmethod
    def naming(cls, *parts, **fields) -> "AgentflowError":
        """An error whose message names settings (module docstring).

        Args:
            parts: text (str) and ``Setting`` pieces, in order.
            fields: the class's own keyword arguments (e.g. ``status=``).

        Returns:
            AgentflowError: of class ``cls``; ``str()`` in the library's words.
        """
        error = cls(_join(parts, Wording()), **fields)
        error.parts = parts
        return error

    def worded(self, wording: Wording) -> str:
        """The message with the settings it names in ``wording``'s words.

        Args:
            wording: a ``Wording`` (e.g. the command line's flags).

        Returns:
            str: ``str(self)`` when the message names no setting.
        """
        return _join(self.parts, wording) if self.parts else str(self)


def _join(parts, wording: Wording) -> str:
    return "".join(p if isinstance(p, str) else wording.word(p) for p in parts)


class ProviderError(AgentflowError):
    """The model provider could not be reached or answered with an error.

    Attributes:
        status: the HTTP status code (int), or ``None`` when the error did not come
            from an HTTP status (connection refused, an ``error`` object inside the
            stream, malformed stream data).
        code: the provider's error code (str or int) when it sent one, else ``None``.
        message: the provider's own message, or ours when it sent none.
        headers: the HTTP response's headers (a mapping, e.g. for ``Retry-After``), or
            ``None``.
        retryable: whether the status says a later try may succeed (408, 409, 429,
            5xx); ``False`` without a status.
        status_code: the same as ``status`` (the openai SDK's name).
        retry_after: the seconds (float) the server asked to wait before another try
            (``retry-after-ms`` or ``Retry-After``), or ``None``.
        attempts: how many requests were made (int, 1 + the retries) before giving up.

    Raised by ``OpenAIChatClient.run``, as the subclass of its status (``provider_error``);
    when it is raised nothing of the failed model turn is persisted to the session
    (SPEC R10).
    """

    def __init__(self, message: str, *, status: int | None = None, code=None,
                 headers=None, retry_after: float | None = None, attempts: int = 1):
        self.status = self.status_code = status
        self.code = code
        self.message = message
        self.headers = headers
        self.retry_after = retry_after
        self.attempts = attempts
        self.retryable = status is not None and (status in (408, 409, 429) or status >= 500)
        parts = []
        if status is not None:
            parts.append(f"HTTP {status}")
        if code not in (None, ""):
            parts.append(f"code {code}")
        self._prefix = f"[{', '.join(parts)}] " if parts else ""
        super().__init__(self._prefix + message)

    def worded(self, wording: Wording) -> str:
        """As ``AgentflowError.worded``, with the ``[HTTP status, code]`` prefix.

        Args:
            wording: a ``Wording``.

        Returns:
            str: the message in ``wording``'s words.
        """
        return self._prefix + _join(self.parts, wording) if self.parts else str(self)


class BadRequestError(ProviderError):
    """HTTP 400, or another 4xx without its own class: the request was refused as it is."""


class AuthenticationError(ProviderError):
    """HTTP 401, or (``status`` ``None``) no API key for an endpoint that needs one: set
    the key, or name a local server's ``base_url``."""


class PermissionDeniedError(ProviderError):
    """HTTP 403: the key may not use this model or endpoint."""


class NotFoundError(ProviderError):
    """HTTP 404: the model or the URL does not exist there (check ``base_url``'s /v1)."""


class ConflictError(ProviderError):
    """HTTP 409 (retried)."""


class UnprocessableEntityError(ProviderError):
    """HTTP 422: the request's content was refused."""


class RateLimitError(ProviderError):
    """HTTP 429: too many requests or tokens; ``retry_after`` says how long the server
    asked to wait (retried up to ``max_retries`` times first)."""


class InternalServerError(ProviderError):
    """HTTP 5xx: the server failed (retried up to ``max_retries`` times first)."""


_BY_STATUS = {400: BadRequestError, 401: AuthenticationError, 403: PermissionDeniedError,
              404: NotFoundError, 409: ConflictError, 422: UnprocessableEntityError,
              429: RateLimitError}


def provider_error(*parts, status: int | None = None, **fields) -> ProviderError:
    """The ``ProviderError`` of an HTTP status: its subclass (``RateLimitError`` for 429,
    ``InternalServerError`` for 5xx, ``BadRequestError`` for other 4xx), or the base class.

    Args:
        parts: the message (str), already scrubbed of the key, or its text and
            ``Setting`` pieces (``AgentflowError.naming``).
        status: the HTTP status (int), or ``None``.
        **fields: ``code``, ``headers``, ``retry_after``, ``attempts`` (as ``ProviderError``).

    Returns:
        ProviderError: the error, not raised.
    """
    kind = ProviderError
    if status is not None:
        kind = _BY_STATUS.get(status) or (InternalServerError if status >= 500 else
                                          BadRequestError if 400 <= status < 500
                                          and status != 408 else ProviderError)
    return kind.naming(*parts, status=status, **fields)


class ProviderTimeoutError(ProviderError):
    """The provider did not connect, or went silent mid-stream, for longer than the
    configured limit (``connect_timeout`` / ``read_timeout``, in seconds)."""


class IncompleteStreamError(ProviderError):
    """The stream ended before the model's turn did: no ``finish_reason`` and no
    ``data: [DONE]`` (SPEC §6). Nothing of that turn is persisted; retry the run."""


class ApprovalError(AgentflowError):
    """The caller's approval responses do not fit the paused run (SPEC R11).

    Raised before any tool executes; the session is unchanged. ``call_ids`` lists the
    offending ``tool_call_id`` values.
    """

    def __init__(self, message: str, call_ids=()):
        self.call_ids = list(call_ids)
        super().__init__(message)


class SessionError(AgentflowError):
    """A saved session could not be used as it is (SPEC R15, R17)."""


class SessionIntegrityError(SessionError):
    """A saved session's signature is missing, unexpected or wrong: the file was
    changed after it was signed, or the wrong secret was given; or a session file is
    older than one its store already wrote (restored from a copy, SPEC R22)."""


class SessionConflictError(SessionError):
    """Another worker wrote the session since this one read it: the write, a
    compare-and-swap on the session's ``revision``, was refused and nothing was
    saved (SPEC R22). Raised before a tool runs when two workers resume the same
    pause, so only one of them runs it. The ``AgentSession`` in hand is stale: load
    it again from the store to see what the other worker did."""


class SessionLockedError(SessionConflictError):
    """Another live worker has the session open (it holds the session's lease: a lock
    file, a PostgreSQL advisory lock), so it may be running one of its calls right now;
    the message names the call. Raised at once, before anything is read, run or written
    (SPEC R16, R22): try again when that run finishes."""


class StoreError(SessionError):
    """A session store's database (or folder) failed: it cannot be reached, it went
    away mid-statement, it is read-only or full, a table is damaged (SPEC R22
    addendum). The message names the store and what to do; the database's own error is
    the ``__cause__``. A ``SessionError``, because the session it was reading or writing
    cannot be used right now.

    Attributes:
        store: what names the store (str: its ``repr``, never a password).
        retryable: ``True`` when a later try may succeed (the connection was lost or
            timed out, the database was locked), ``False`` when something must be
            fixed first.
        saved: for a write, ``False`` when nothing was saved, ``None`` when the
            connection was lost during the commit, so the write may or may not have
            happened (load the session again to see); ``None`` for a read too.
    """

    def __init__(self, message: str, *, store: str = "", retryable: bool = False,
                 saved: bool | None = None):
        self.store = store
        self.retryable = retryable
        self.saved = saved
        super().__init__(message)


class LoopStateError(AgentflowError):
    """An illegal transition of the tool loop's state machine was attempted. This is a
    bug in agentflow (or in a subclass of ``FunctionInvokingChatClient``), never a
    caller error."""


class PolicyError(AgentflowError, ValueError):
    """An approval policy cannot be used (SPEC R19): a file that is not a policy, a
    rule that cannot be read, or a rule that can never match the tools it is given to
    (an unknown tool, a pattern on a tool without a subject). Raised when the policy is
    loaded or meets the tools, never halfway through a run."""


class ResultConversionError(AgentflowError):
    """A tool ran, but its result could not be turned into text. The loop reports
    ``the tool ran; its result could not be converted: …`` and never ``Error: …``,
    which would invite the model to run the side effect again (SPEC R16)."""


class MCPError(AgentflowError):
    """An MCP server could not be started, stopped answering, died or refused a call.

    Attributes:
        server: the server's name (str).

    Raised by ``MCPServer.start`` (nothing is running afterwards) and by a tool's
    ``invoke`` (the loop reports it to the model as ``Error: MCPError: …``, SPEC R13,
    and the session stays valid). After a server died, ``MCPServer.restart()`` starts
    it again; the call that was in flight is not repeated.
    """

    def __init__(self, message: str, server: str = ""):
        self.server = server
        super().__init__(message)


class MCPTimeoutError(MCPError):
    """A tool call gave no answer within its ``timeout`` (seconds); it was cancelled
    and may have partly run on the server. The server stays usable."""


class MCPToolError(MCPError):
    """The tool ran and reported a failure (``isError: true``); the message is the
    server's own text."""


class SandboxError(AgentflowError):
    """A command cannot run in the sandbox it must run in (issue 27): the sandbox is
    required and ``bwrap`` cannot start here. Nothing was run."""


class UnreadableCommandLine(AgentflowError, ValueError):
    """The shell reader cannot fully read a command line (unbalanced quotes, a
    redirection without a target …). Never leaves ``agentflow.commandline.shell.parse``:
    the line comes back ``opaque`` with this message as the reason, and no allow
    pattern can match it (SPEC R19: what cannot be read is never allowed)."""
