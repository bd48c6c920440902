"""Credentials out of every text the library shows or stores.

A URL may carry a secret: user info (``https://user:password@host/x.jpg``, a token as the user
name) or a signed query string (``?X-Amz-Signature=...``, ``?X-Goog-Signature=...``, an Azure
SAS ``sig=``, ``token=``, ``key=``). :func:`redact` replaces those parts of every URL found in
a text with ``REDACTED``; the rest of the URL stays, so that people still see which file it is.
Error messages, log records, ``rejected.csv`` and ``metadata.json`` go through it.
"""

import logging
import re

REDACTED = "REDACTED"

# Query parameters whose value is (or signs) a credential: compared case-insensitively with
# the whole name, or found inside it (the second list).
SECRET_PARAMETERS = frozenset({
    "sig", "signature", "x-amz-signature", "x-amz-credential", "x-amz-security-token",
    "x-goog-signature", "x-goog-credential", "googleaccessid", "awsaccesskeyid", "policy",
    "key", "apikey", "api_key", "api-key", "code", "auth", "authorization", "password",
    "passwd", "pwd", "secret", "token", "access_token", "id_token", "refresh_token",
    "client_secret", "sas", "x-ms-signature",
})
_SECRET_PARTS = ("token", "secret", "signature", "password", "credential", "apikey", "api_key")

_URL = re.compile(r"""\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'"<>()\[\]{}`]+""")
_USER_INFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*@)")  # to the authority's last @
_PARAMETER = re.compile(r"([?&;])([^=&;#]+)=([^&;#]*)")


def is_secret_parameter(name):
    """True for a query parameter whose value must not be shown (see ``SECRET_PARAMETERS``)."""
    name = name.strip().lower()
    return name in SECRET_PARAMETERS or any(part in name for part in _SECRET_PARTS)


def redact_url(url):
    """``url`` without its user info and the values of its secret query parameters."""
    url = _USER_INFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", url, count=1)
    if "?" not in url and ";" not in url:
        return url
    return _PARAMETER.sub(lambda m: f"{m.group(1)}{m.group(2)}={REDACTED}"
                          if is_secret_parameter(m.group(2)) else m.group(0), url)


def redact(text):
    """``text`` (anything; not text: returned as it is) with every URL in it redacted."""
    if not isinstance(text, str) or "://" not in text:
        return text
    return _URL.sub(lambda m: redact_url(m.group(0)), text)


def shown(value, limit=80):
    """A value (from a file, a table) as short text for a message: its ``repr``, redacted
    before it is cut to ``limit`` characters (a URL cut first could lose the ``@`` or the
    parameter name that marks its secret)."""
    text = redact(repr(value))
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _storable(value):
    """Text as it can be stored: a lone surrogate (no UTF-8 file holds one) escaped as
    ``\\udXXX``; anything else as it is."""
    if isinstance(value, str) and not value.isascii():
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def redact_cell(value):
    """A cell bound for a file: redacted, and text that is no valid Unicode escaped (so that
    it can be written as UTF-8). A list, tuple or dict (a multi-label or mask cell) is written
    as its text: that text redacted when it holds a URL with a secret, else the value as is."""
    if isinstance(value, (list, tuple, dict)):
        text = str(value)
        clean = redact(text)
        return value if clean == text else clean
    return redact(_storable(value))


def redact_frame(frame):
    """A copy of a DataFrame with every text cell (:func:`redact_cell`), column name and
    index label redacted."""
    frame = frame.map(redact_cell)
    frame.index = frame.index.map(redact)
    frame.columns = frame.columns.map(redact)
    return frame


class RedactingFilter(logging.Filter):
    """A logging filter that redacts the message of every record it passes."""

    def filter(self, record):
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        return True


def logger(name):
    """``logging.getLogger(name)``, whose records are redacted before any handler sees them."""
    log = logging.getLogger(name)
    if not any(isinstance(f, RedactingFilter) for f in log.filters):
        log.addFilter(RedactingFilter())
    return log
