"""The provider client of a chat, after checking the endpoint and the key: a URL
without http:// and a missing OpenAI key are said before anything connects."""

from __future__ import annotations

import os
import re
import shlex

from .errors import UsageError

_OPENAI_HOST = "api.openai.com"


def make_client(args, settings: dict):
    """The ``OpenAIChatClient`` for this chat (imported here, not with the CLI:
    ``agentflow --help`` should cost little more than ``import agentflow``).

    Args:
        args: the ``argparse.Namespace`` of ``agentflow chat``.
        settings: as ``settings.chat_settings`` returns.

    Returns:
        OpenAIChatClient: for ``settings["model"]`` at the checked base URL.

    Raises:
        UsageError: the base URL is not an http(s) URL, or OpenAI is named without a key.
    """
    from urllib.parse import urlsplit
    from ..openai_client import DEFAULT_BASE_URL, OpenAIChatClient
    if args.base_url is not None:
        url, source = settings["base_url"], "--base-url"
    elif settings["base_url"]:
        url, source = settings["base_url"], f"the --base-url remembered in {args.session}"
    elif os.environ.get("OPENAI_BASE_URL"):
        url, source = os.environ["OPENAI_BASE_URL"], "OPENAI_BASE_URL"
    else:
        url, source = DEFAULT_BASE_URL, None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a bad port or IPv6 literal raises only here
    except ValueError as exc:
        raise UsageError(f"{source or 'the base URL'} {url!r} is not a valid URL ({exc}); "
                         "write it as http://HOST:PORT/v1, with an IPv6 address in "
                         "brackets: http://[::1]:8080/v1") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        rest = url.split("://", 1)[-1]
        fixed = ("http://HOST:PORT/v1" if re.match(r"[A-Za-z][\w+.-]*:/", rest)
                 else shlex.quote("http://" + rest))
        fix = (f"export OPENAI_BASE_URL={fixed}" if source == "OPENAI_BASE_URL"
               else f"--base-url {fixed}")
        raise UsageError(f"{source} {url!r} is not an http:// or https:// URL; write "
                         f"{fix} (or https:// for a remote server)")
    variable = settings["api_key_env"]
    key = os.environ.get(variable) or ""
    if not key and parts.hostname == _OPENAI_HOST:
        where = "OpenAI (the default endpoint)" if source is None else url
        raise UsageError(
            f"no API key: {variable} is not set, and {where} needs one. Set it "
            f"(export {variable}=sk-...), or name the variable that holds it with "
            "--api-key-env VAR; for a local server, give its --base-url (e.g. "
            "http://localhost:11434/v1)")
    client = OpenAIChatClient(settings["model"], base_url=url, api_key=key,
                              read_timeout=args.read_timeout, max_retries=args.max_retries,
                              profile=settings["profile"])
    client.key_source = f"the {variable} environment variable (--api-key-env)"
    return client
