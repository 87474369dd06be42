"""Canonical JSON (RFC 8785, the JSON Canonicalization Scheme) and the arguments digest.

The digest of a call's arguments binds a human's decision to what they were shown
(SPEC §3, ``ToolApprovalRequest.digest``). Other languages must compute the same value,
so the canonical form is RFC 8785's, not Python's ``json.dumps``:

* object members sorted by their names' UTF-16 code units (RFC 8785 §3.2.3), which
  differs from code-point order for characters beyond U+FFFF;
* numbers as ECMAScript's ``Number.prototype.toString`` writes the IEEE 754 double
  (§3.2.2.3): ``1.0`` is ``1``, ``1e21`` is ``1e+21``, ``-0`` is ``0``;
* strings with only ``"``, ``\\``, and U+0000–U+001F escaped (the short forms
  ``\\b \\t \\n \\f \\r``, else ``\\u00xx`` in lower-case hex), everything else as is,
  encoded as UTF-8 (§3.2.2.2); a lone surrogate, which is not Unicode and has no UTF-8
  form, has no canonical form (§3.1: the input is Unicode);
* no whitespace.

Written iteratively, so arguments nested thousands deep cannot raise ``RecursionError``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re

__all__ = ["canonical_json", "arguments_digest", "schema2_arguments_digest"]

_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n",
            "\f": "\\f", "\r": "\\r"}


def canonical_json(value, *, lone_surrogates: bool = False) -> str:
    """The RFC 8785 canonical text of ``value``.

    Args:
        value: JSON data as Python values: ``dict`` (str keys), ``list``/``tuple``,
            ``str``, ``int``, ``float``, ``bool`` or ``None``.
        lone_surrogates: keep a lone surrogate (U+D800–U+DFFF) as it is instead of
            refusing it; only for text this repository alone reads back (a session's
            signature, where a file name's undecodable bytes are data), never for a
            digest another language must compute.

    Returns:
        The canonical JSON text (str); encode it as UTF-8 for hashing.

    Raises:
        ValueError: for NaN or an infinity (not representable in JSON, RFC 8785
            §3.2.2.3), an integer beyond the IEEE 754 double range (about 1.8e308,
            which RFC 8785 numbers are), a string holding a lone surrogate (not
            Unicode, RFC 8785 §3.1; unless ``lone_surrogates``), or a value that is
            not JSON data.
    """
    string = _string if lone_surrogates else _unicode_string
    out: list[str] = []
    stack: list = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Literal):
            out.append(item.text)
        elif isinstance(item, dict):
            members = sorted(item.items(), key=lambda kv: _utf16_key(kv[0]))
            parts: list = [_Literal("}")]
            for position in range(len(members) - 1, -1, -1):
                name, member = members[position]
                if not isinstance(name, str):
                    raise ValueError(f"object keys must be strings, got {name!r}")
                parts.append(member)
                parts.append(_Literal(("," if position else "") + string(name) + ":"))
            parts.append(_Literal("{"))
            stack.extend(parts)
        elif isinstance(item, (list, tuple)):
            parts = [_Literal("]")]
            for position in range(len(item) - 1, -1, -1):
                parts.append(item[position])
                if position:
                    parts.append(_Literal(","))
            parts.append(_Literal("["))
            stack.extend(parts)
        elif isinstance(item, str):
            out.append(string(item))
        elif item is True:
            out.append("true")
        elif item is False:
            out.append("false")
        elif item is None:
            out.append("null")
        elif isinstance(item, (int, float)):
            try:
                number = float(item)
            except OverflowError:
                raise ValueError(f"the integer of {len(str(abs(item)))} digits is beyond "
                                 "the IEEE 754 double range of RFC 8785 numbers") from None
            out.append(_number(number))
        else:
            raise ValueError(f"not JSON data: {type(item).__name__}")
    return "".join(out)


def arguments_digest(arguments: str) -> str:
    """SHA-256 (64 lower-case hex digits) of a call's arguments in canonical form.

    Args:
        arguments: the raw JSON text the model produced (``ToolCall.arguments``).

    Returns:
        The hex digest of the UTF-8 bytes of ``canonical_json(json.loads(arguments))``;
        text that has no canonical form (not JSON, nested too deep for the decoder,
        NaN, a number beyond the double range such as a 400-digit integer, a lone
        surrogate) is hashed as it is, so every call has a digest (SPEC §3) and another
        language computes the same one.
    """
    try:
        text = canonical_json(json.loads(arguments))
    except (ValueError, RecursionError):
        text = arguments
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def schema2_arguments_digest(arguments: str) -> str:
    """The digest an agentflow of session schema 2 may have recorded before RFC 8785:
    SHA-256 of ``json.dumps(json.loads(arguments), sort_keys=True, separators=(",",
    ":"), ensure_ascii=False)``, where ``12.0`` stays ``12.0`` (RFC 8785 writes ``12``).
    Only to honour records that version wrote (SPEC R23); never used for a new one.

    Args:
        arguments: the raw JSON text of the call (``ToolCall.arguments``).

    Returns:
        str: 64 lower-case hex digits; text that is not JSON is hashed as it is.
    """
    try:
        text = json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False)
    except (ValueError, RecursionError):
        text = arguments
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class _Literal:
    """Text already in canonical form, queued between the values still to write."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def _utf16_key(name: str) -> bytes:
    return name.encode("utf-16-be", "surrogatepass")


def _unicode_string(text: str) -> str:
    lone = _SURROGATE.search(text)
    if lone:
        raise ValueError(f"the string holds a lone surrogate (U+{ord(lone.group()):04X} at "
                         f"{lone.start()}), which is not Unicode: RFC 8785 has no form for it")
    return _string(text)


def _string(text: str) -> str:
    out = ['"']
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char < " ":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _number(number: float) -> str:
    """ECMAScript Number.prototype.toString of an IEEE 754 double (ECMA-262 §6.1.6.1.20)."""
    if math.isnan(number) or math.isinf(number):
        raise ValueError(f"{number} is not a JSON number")
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    # repr gives the shortest digits that round-trip, as ECMAScript requires.
    mantissa, _, exponent = repr(abs(number)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction.rstrip("0")).lstrip("0") or "0"
    # n: the position of the decimal point relative to the digits (ECMA-262's n).
    n = len(whole.lstrip("0")) if whole.strip("0") else -(len(fraction) - len(fraction.lstrip("0")))
    n += int(exponent or 0)
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    exp = f"e{'+' if e >= 0 else '-'}{abs(e)}"
    if k == 1:
        return sign + digits + exp
    return sign + digits[0] + "." + digits[1:] + exp
