"""Which strings are secrets: a process-wide registry of secret values in every printed form.

Whatever reads a credential registers it here: the settings (URL user-info, header values,
the bearer token file, a client key), the Prometheus client on every token read (a rotated
token is new), the Kubernetes client. :func:`mask` replaces each registered value in a text
with ``***``, in the forms a server or a library may print it: as is, percent-encoded (a URL),
JSON- or Python-escaped (a JSON body, a ``repr``), and, for user and password, the base64 of
``user:password`` that an ``Authorization: Basic`` header carries. The output streams of the
command line (:mod:`scaler.telemetry.redact`) apply it to every line; a text cut short
(a server's answer in a detail) is masked before the cut, by :func:`shortened`.

Values shorter than :data:`MIN_SECRET_LENGTH` are not masked: they would mask ordinary text.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
from pathlib import Path
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit

__all__ = [
    "CREDENTIAL_HEADER",
    "MASK",
    "MIN_SECRET_LENGTH",
    "NON_SECRET_HEADERS",
    "held_prefix_start",
    "hostless_userinfo",
    "mask",
    "register_basic_credentials",
    "register_file_secret",
    "register_header",
    "register_private_key_file",
    "register_secret",
    "register_url_credentials",
    "shortened",
    "token_in",
]

MASK = "***"
MIN_SECRET_LENGTH = 4

#: Headers whose values are routing, not credentials: the tenant of Cortex/Mimir/Loki
#: (``X-Scope-OrgID``) and of Thanos (``THANOS-TENANT``). Every other header value is masked.
NON_SECRET_HEADERS = frozenset({"x-scope-orgid", "thanos-tenant"})

#: Header names that carry a credential (the Helm chart refuses them in plain ``headers`` by
#: the same rule; a test keeps the two equal): ``Authorization``, ``X-Api-Key``, ``Cookie``,
#: ``X-Auth-Token``... A header that neither routes nor matches is masked too, but not named
#: as authentication.
CREDENTIAL_HEADER = re.compile(
    r"auth|cookie|token|key|secret|password|passwd|credential|session", re.IGNORECASE
)

#: Query parameters of a URL whose values are credentials (``?access_token=...``).
_SECRET_PARAM = re.compile(r"token|key|secret|password|passwd|auth|signature|sig", re.IGNORECASE)

_lock = threading.Lock()
_forms: set[str] = set()
_pattern: re.Pattern[str] | None = None
_by_first: dict[str, tuple[str, ...]] = {}  # first character -> the forms starting with it
_longest = 0


def _printed_forms(value: str) -> set[str]:
    """``value`` as servers and libraries print it: raw, in a URL, in JSON, in a repr."""
    forms = {
        value,
        quote(value, safe=""),
        quote_plus(value, safe=""),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
        repr(value.encode())[2:-1],  # inside the repr of a bytes body
    }
    return {f for f in forms if len(f) >= MIN_SECRET_LENGTH}


def register_secret(value: str) -> None:
    """Mask ``value`` (stripped) from now on, in every form of :func:`_printed_forms`.

    Values shorter than :data:`MIN_SECRET_LENGTH` characters are ignored.
    """
    value = value.strip()
    if len(value) < MIN_SECRET_LENGTH:
        return
    global _pattern, _by_first, _longest
    new = _printed_forms(value)
    with _lock:
        if new <= _forms:
            return
        _forms.update(new)
        ordered = sorted(_forms, key=len, reverse=True)  # the longest form wins at a position
        by_first: dict[str, list[str]] = {}
        for f in ordered:
            by_first.setdefault(f[0], []).append(f)
        _by_first = {c: tuple(fs) for c, fs in by_first.items()}
        _longest = len(ordered[0])
        _pattern = re.compile("|".join(re.escape(f) for f in ordered))


def register_basic_credentials(user: str, password: str) -> None:
    """Mask a password and the base64 ``user:password`` of HTTP Basic authentication.

    Without a password the user name is the credential (httpx and requests send a URL's
    ``token@host`` as Basic ``token:``; proxies carry tokens so): it is masked instead.
    """
    register_secret(password or user)
    if password or user:
        register_secret(base64.b64encode(f"{user}:{password}".encode()).decode())


def register_url_credentials(url: str) -> None:
    """Mask the password of a URL's user-info (as written and decoded), its Basic form, and
    the values of credential-looking query parameters (``access_token``, ``api_key``...).
    A user name without a password is masked as the password would be.

    A URL without a host part (no scheme: ``user:pw@host``), or whose ``@`` comes after the
    host part (a password holding ``/``, ``?`` or ``#``), registers the user-info of
    :func:`hostless_userinfo`. Never raises: an unparsable URL registers what can be found.
    """
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return
    userinfo, at, _ = parts.netloc.rpartition("@")
    span = hostless_userinfo(url.strip()) if not at else None
    if span is not None:
        userinfo, at = url.strip()[span[0] : span[1]], "@"
        register_secret(userinfo.rpartition(":")[2])  # where a scheme may end is unknown
    if at:
        user, _, password = userinfo.partition(":")
        register_secret(password or user)
        register_basic_credentials(unquote(user), unquote(password))
    for name, value in parse_qsl(parts.query, keep_blank_values=False):
        if _SECRET_PARAM.search(name):
            register_secret(value)


def hostless_userinfo(url: str) -> tuple[int, int] | None:
    """Where the user-info of a URL that has no host part to split it from may be
    (``user:pw@host``, written without its scheme): from the first ``//`` before the last
    ``@`` (or the start) to that ``@``, as ``(start, end)``; None without an ``@``."""
    at = url.rfind("@")
    if at < 0:
        return None
    slashes = url.find("//", 0, at)
    return (slashes + 2 if slashes >= 0 else 0), at


def register_header(name: str, value: str) -> None:
    """Mask the value of an extra request header, unless it only routes (a tenant id).

    ``Authorization: Basic <b64>`` also masks the decoded ``user:password`` and password;
    ``<scheme> <credential>`` masks the credential alone too; ``Cookie`` masks each value.
    """
    if name.strip().lower() in NON_SECRET_HEADERS:
        return
    register_secret(value)
    scheme, space, credential = value.strip().partition(" ")
    if space:
        register_secret(credential)
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(credential.strip(), validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                decoded = ""
            user, colon, password = decoded.partition(":")
            if colon:
                register_secret(decoded)
                register_basic_credentials(user, password)
    if name.strip().lower() == "cookie":
        for pair in value.split(";"):
            register_secret(pair.partition("=")[2])


def token_in(data: bytes) -> str:
    """The bearer token a token file holds: its content without the line break around it.

    Raises:
        ValueError: the content is not UTF-8, is empty, spans several lines or holds
            whitespace inside the token (sent as is, a server echoing part of it would print
            that part unmasked). The message says which, never the content.
    """
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ValueError("the file is not UTF-8 text; expected a file holding a token") from None
    if not text:
        raise ValueError("the file is empty; expected a file holding a token")
    lines = text.splitlines()
    if len(lines) > 1:
        raise ValueError(f"the file holds {len(lines)} lines; expected one token on one line")
    if any(c.isspace() for c in text):
        raise ValueError("the token holds whitespace; expected one token without spaces")
    return text


def register_file_secret(path: Path) -> str | None:
    """Read a file that holds a secret (a token), mask its stripped content and return it.

    Returns None when the file cannot be read as UTF-8 text (the caller reports that).
    """
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    register_secret(text)
    return text


_PEM_KEY = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----(.*?)-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL
)


def register_private_key_file(path: Path) -> None:
    """Mask the private key(s) in a PEM file: each base64 line of each key block.

    The file's path is no secret; a certificate in the same file is not masked.
    """
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    for match in _PEM_KEY.finditer(text):
        for line in match.group(1).splitlines():
            if ":" not in line:  # not a header line of a legacy encrypted key
                register_secret(line)


def mask(text: str) -> str:
    """``text`` with every registered secret form replaced by :data:`MASK`."""
    pattern = _pattern
    if pattern is None or not text:
        return text
    return pattern.sub(MASK, text)


def shortened(text: str, limit: int) -> str:
    """``text`` masked, on one line and cut to ``limit`` characters (``...`` ends a cut one).

    Masking comes before the cut: a secret cut short no longer matches its registered forms,
    and an output stream masking it later would print all but its last characters. A cut
    that ends in the start of a secret anyway (a form the text did not hold in full) ends in
    :data:`MASK` instead, when that start is :data:`MIN_SECRET_LENGTH` characters or more
    (shorter ones would mask ordinary text); the result may then be two characters longer.
    """
    text = " ".join(mask(text).split())
    if len(text) <= limit:
        return text
    text = text[: limit - 3]
    start = held_prefix_start(text)
    if len(text) - start >= MIN_SECRET_LENGTH:
        text = text[:start] + MASK
    return text + "..."


def held_prefix_start(text: str) -> int:
    """Where the longest suffix of ``text`` that may be the start of a secret begins.

    A stream that masks text written in pieces keeps ``text[i:]`` back until the next piece
    shows whether a secret continues there; ``len(text)`` when no suffix needs holding.
    """
    by_first = _by_first
    for i in range(max(0, len(text) - _longest + 1), len(text)):
        candidates = by_first.get(text[i])
        if candidates:
            tail = text[i:]
            if any(len(f) > len(tail) and f.startswith(tail) for f in candidates):
                return i
    return len(text)
