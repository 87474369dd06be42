"""What the person running agentflow has trusted (SPEC R26).

Two things can widen what runs without asking, or change where the API key goes,
without the person having said so on this command line:

* a project policy file (``.agentflow/policy.json``) shipped in the repository being
  worked on: its ``allow`` rules would run commands unasked the moment ``agentflow
  chat`` starts there. They apply once the person has trusted the file's exact
  contents: shown on a terminal and remembered in the user's configuration folder by
  the file's path and the SHA-256 of its bytes, asked again when it changes; without a
  terminal, untrusted ``allow`` rules are left out with a note. ``deny`` and ``ask``
  rules only narrow, so they always apply.
* a session file handed to ``--session`` that remembers an endpoint, an API-key
  variable or a workspace: the key would be sent to the remembered host, tools would
  work in the remembered folder. They are used only when this user's own agentflow
  wrote them, which it proves with an HMAC under a key of this user's
  (``settings.key`` in the configuration folder, made on first use, mode 0600), or
  after the person confirms them on a terminal; without one the run stops and names
  the setting.

Both records live in ``$XDG_CONFIG_HOME/agentflow/`` (else ``~/.config/agentflow/``),
beside the user policy file: that folder is the person's, a repository is not.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import shlex

from ..durable import write_atomically
from ..display import safe_text
from ..errors import PolicyError
from ..policy import ApprovalPolicy, user_policy_path

# Remembered settings that decide where the key goes and where the tools work (R26).
ROUTING = ("base_url", "api_key_env", "workspace")
SIGNATURE = "chat_signature"  # session.state key: the HMAC of the remembered settings
GRANT_SIGNATURES = "grant_signatures"  # session.state key: the HMAC of each grant


def config_dir() -> str:
    """The user's agentflow configuration folder (str), where the user policy lives."""
    return os.path.dirname(user_policy_path())


def _trust_file() -> str:
    return os.path.join(config_dir(), "trusted.json")


def _read_trusted() -> dict:
    try:
        with open(_trust_file(), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    files = data.get("project_files") if isinstance(data, dict) else None
    return {k: v for k, v in files.items() if isinstance(v, str)} \
        if isinstance(files, dict) else {}


def digest_of(path: str) -> tuple[str, bytes] | None:
    """The SHA-256 and the bytes of a file.

    Args:
        path: the file (str).

    Returns:
        tuple | None: ``(sha256 hex, bytes)``, or ``None`` when it cannot be read.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    return hashlib.sha256(data).hexdigest(), data


def is_trusted(path: str) -> bool:
    """Whether the person trusted the project file at ``path`` with its contents now.

    Args:
        path: the project policy file (str); compared by absolute path.

    Returns:
        bool: ``True`` when its path and the SHA-256 of its bytes were trusted.
    """
    found = digest_of(path)
    return found is not None and is_trusted_digest(path, found[0])


def is_trusted_digest(path: str, digest: str) -> bool:
    """Whether the person trusted the project file at ``path`` holding the contents
    whose SHA-256 is ``digest`` (bytes read once, judged and used: SPEC R26).

    Args:
        path: the project policy file (str); compared by absolute path.
        digest: the SHA-256 (hex str) of the bytes that will apply.

    Returns:
        bool: ``True`` when that path with those contents was trusted.
    """
    return _read_trusted().get(os.path.abspath(path)) == digest


def trust(path: str, data: bytes | None = None) -> None:
    """Remember that the person trusts the project file at ``path`` as it is now, or
    with the contents ``data`` they were shown (a file changed since is not trusted).

    Args:
        path: the project policy file (str).
        data: the contents trusted (bytes), or ``None`` for the file's bytes now.

    Raises:
        OSError: the configuration folder cannot be written.
    """
    found = digest_of(path) if data is None else (hashlib.sha256(data).hexdigest(), data)
    if found is None:
        return
    files = _read_trusted()
    files[os.path.abspath(path)] = found[0]
    os.makedirs(config_dir(), exist_ok=True)
    write_atomically(_trust_file(), json.dumps({"project_files": files}, indent=1) + "\n",
                     prefix=".trusted-")


def untrust(path: str) -> bool:
    """Forget that the person trusted the project file at ``path``.

    Args:
        path: the project policy file (str); compared by absolute path.

    Returns:
        bool: ``True`` when a record was removed.

    Raises:
        OSError: the configuration folder cannot be written.
    """
    files = _read_trusted()
    if files.pop(os.path.abspath(path), None) is None:
        return False
    write_atomically(_trust_file(), json.dumps({"project_files": files}, indent=1) + "\n",
                     prefix=".trusted-")
    return True


def _widening(layer: ApprovalPolicy) -> list[str]:
    return sorted(k for k, v in layer.sandbox.items() if v)  # issue 27: these widen too


def widens(layer: ApprovalPolicy) -> bool:
    """Whether a policy layer widens what runs without asking: ``allow`` rules, or a
    ``sandbox`` setting that is true (``auto_allow``, ``network``).

    Args:
        layer: an ``ApprovalPolicy``.

    Returns:
        bool: ``True`` when trusting it would change what runs (SPEC R26).
    """
    return bool(layer.allow or _widening(layer))


def widening_text(layer: ApprovalPolicy, data: bytes) -> str:
    """What a person is shown before trusting a project file: its widening settings
    exactly, then the whole file, escaped (SPEC R25, R26).

    Args:
        layer: the policy read from ``data`` (its ``source`` is the file).
        data: the file's bytes, the ones whose SHA-256 is recorded.

    Returns:
        str: the lines, without a question.
    """
    widening = _widening(layer)
    shown = safe_text(data.decode("utf-8", "replace"), multiline=True)
    return (f"The project policy file {safe_text(str(layer.source))} lets these run without "
            "asking:\n"
            + (f"  allow: {', '.join(safe_text(r) for r in layer.allow)}\n" if layer.allow
               else "")
            + (f"  sandbox: {', '.join(widening)}\n" if widening else "")
            + f"Its contents:\n{shown}")


def widening_names(layer: ApprovalPolicy) -> str:
    """What trusting a project file applies, in words.

    Args:
        layer: its ``ApprovalPolicy``.

    Returns:
        str: ``allow rules``, ``sandbox settings`` or both.
    """
    return " and ".join((["allow rules"] if layer.allow else [])
                        + (["sandbox settings"] if _widening(layer) else []))


def without_allows(layer: ApprovalPolicy) -> ApprovalPolicy:
    """``layer`` with its ``allow`` rules and ``sandbox`` settings left out: what an
    untrusted project file may still do (narrow).

    Args:
        layer: the project file's ``ApprovalPolicy``.

    Returns:
        ApprovalPolicy: a copy with the same ``deny`` and ``ask`` rules, name and source.
    """
    return ApprovalPolicy(deny=list(layer.deny), ask=list(layer.ask), allow=[],
                          name=layer.name, source=layer.source)


def trusted_project(layer: ApprovalPolicy, confirm=None, notes=None) -> ApprovalPolicy:
    """The project layer as it may apply (SPEC R26).

    Args:
        layer: the project file's ``ApprovalPolicy`` (its ``source`` is the file).
        confirm: a callable ``(question: str) -> bool`` that asks the person on a
            terminal, or ``None`` without one.
        notes: a list that gets a line when ``allow`` rules are left out.

    Returns:
        ApprovalPolicy: ``layer`` when it has no ``allow`` rules and no ``sandbox``
        setting that widens (``auto_allow``, ``network``; issue 27), or its contents are
        trusted (now, or by the person's answer); else ``without_allows(layer)``.
    """
    if layer.source is None:
        return layer
    # judge, show and apply the same bytes: a file changed after it was loaded (or after
    # it was shown) must not pass on the hash of what it held before (TOCTOU)
    found = digest_of(layer.source)
    try:
        layer = layer if found is None else ApprovalPolicy.loads(found[1], layer.name,
                                                                 layer.source)
    except PolicyError:
        found = None
    if not widens(layer):
        return layer
    if found is not None and is_trusted_digest(layer.source, found[0]):
        return layer
    if confirm is not None and found is not None:
        question = (widening_text(layer, found[1]) + f"\nTrust this file's "
                    f"{widening_names(layer)} (remembered until it changes)? [y/N] ")
        if confirm(question):
            trust(layer.source, found[1])
            return layer
    if notes is not None:
        why = ("the file changed since you trusted it" if
               os.path.abspath(layer.source) in _read_trusted() else "the file is not trusted "
               "yet (a repository could grant itself anything)")
        notes.append(f"policy: the {widening_names(layer)} of {layer.source} are not "
                     f"applied: {why}. Review and trust it with agentflow policy trust "
                     f"{shlex.quote(str(layer.source))}; its deny and ask rules apply")
    return without_allows(layer)


# -- remembered settings --------------------------------------------------------------------

def _user_key() -> bytes:
    """This user's key for signing remembered settings, made on first use (mode 0600)."""
    return made_key(os.path.join(config_dir(), "settings.key"))


def made_key(path: str) -> bytes:
    """The key in ``path``, made there on first use: 32 random bytes, mode 0600, in a
    folder of mode 0700; when two processes make it at once, both use the first.

    Args:
        path: the key file (str).

    Returns:
        bytes: the key.

    Raises:
        OSError: it cannot be read or made.
    """
    try:
        with open(path, "rb") as handle:
            key = handle.read()
        if len(key) >= 32:
            return key
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    key = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        with open(path, "rb") as handle:
            return handle.read()
    with os.fdopen(fd, "wb") as handle:
        handle.write(key)
        handle.flush()
        os.fsync(handle.fileno())
    return key


def _routing(settings: dict) -> bytes:
    return json.dumps({k: settings.get(k) for k in ROUTING}, sort_keys=True).encode()


def sign(settings: dict) -> str:
    """The HMAC-SHA256 (hex) of the routing settings under this user's key.

    Args:
        settings: the chat's settings (dict with the ``ROUTING`` keys).

    Returns:
        str: the signature to keep beside them in the session.
    """
    return hmac.new(_user_key(), _routing(settings), hashlib.sha256).hexdigest()


def signed_by_me(settings: dict, signature) -> bool:
    """Whether ``signature`` is this user's signature of ``settings``' routing keys.

    Args:
        settings: the remembered settings (dict).
        signature: what the session holds under ``SIGNATURE`` (any value).

    Returns:
        bool: ``True`` only for a valid signature made with this user's key.
    """
    return isinstance(signature, str) and hmac.compare_digest(signature, sign(settings))


def sign_grant(grant) -> str:
    """The HMAC-SHA256 (hex) of one session grant under this user's key: a grant is an
    allow rule, so one this user's agentflow did not record is not applied (SPEC R26).

    Args:
        grant: an ``approvals.SessionGrant``.

    Returns:
        str: the signature kept in the session's ``GRANT_SIGNATURES`` list.
    """
    text = json.dumps([grant.rule, grant.granted_at, grant.expires_at, grant.approver,
                       grant.call_id]).encode()
    return hmac.new(_user_key(), b"grant\0" + text, hashlib.sha256).hexdigest()
