"""Why a file could not be read, in the same words whatever the store: the local disk, http(s),
gcsfs, s3fs.

A file that cannot be read is reported with a short reason: "file not found" only when the
store said so (HTTP 404, no such key), "access denied (HTTP 403 Forbidden)", "HTTP 500
Internal Server Error after 3 tries", "timed out after 60 s". :func:`explain` turns what
gcsfs, s3fs, aiohttp and botocore raise into those; :func:`one_line` makes any error of a
store one line for the command line (credentials missing or refused, a missing bucket), with
every URL in it redacted. A file refused before it was read whole (too large, not a regular
file, first bytes the caller does not want) is a :class:`FileRefused`.
"""

import errno
import http
import re
import sys

from ..redaction import redact

# What each store does by itself: gcsfs retries 5xx, 408, 429 and connection errors (its own
# count, fixed in the class); s3fs asks botocore, which retries 5xx, throttling and connection
# errors; gcsfs waits aiohttp's default 5 minutes for a whole request, s3fs 15 s for each read.
_GCSFS_RETRIED = {408, 429, 500, 501, 502, 503, 504}
_AIOHTTP_TOTAL_TIMEOUT = 300


def human_size(n):
    """``n`` bytes as people read it: 812 bytes, 3.6 MB, 6.0 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


class FileRefused(OSError):
    """A file refused before it was read whole: too large, or its first bytes say it is not
    what the caller wants. ``reason`` says why, for people."""

    def __init__(self, path, reason):
        super().__init__(0, reason, path)
        self.reason = reason

    def __reduce__(self):
        return type(self), (self.filename, self.reason)


class FileTooLarge(FileRefused):
    """A file over a size limit, refused without being read whole.

    The reason names the sizes only; a caller that knows which option set the limit words its
    own reason from ``found`` and ``limit``.

    Attributes:
        size: the file's size in bytes, or None when it is only known to be over the limit.
        limit: the limit in bytes.
    """

    def __init__(self, path, size, limit):
        self.size, self.limit = size, limit
        super().__init__(path, f"file too large: {self.found} (limit {human_size(limit)})")

    @property
    def found(self):
        """The size as people read it: "6.0 GB", or "over 5.0 GB" when only that is known."""
        return human_size(self.size) if self.size is not None else \
            f"over {human_size(self.limit)}"

    def __reduce__(self):
        return type(self), (self.filename, self.size, self.limit)


def too_large(path, size, limit):
    """The FileTooLarge of a file of ``size`` bytes (None: more than was read) over ``limit``."""
    return FileTooLarge(path, size, limit)


class ReadFailure(OSError):
    """A file that could not be read (or asked about); ``reason`` says why, for people.

    Attributes:
        url: the file.
        reason: e.g. "HTTP 500 Internal Server Error after 3 tries".
    """

    def __init__(self, url, reason):
        super().__init__(f"{redact(str(url))}: {reason}")
        self.url, self.reason = url, reason

    def __reduce__(self):
        return type(self), (self.url, self.reason)


class AccessDenied(ReadFailure, PermissionError):
    """The store refused the request (HTTP 401 or 403, or its own "access denied")."""


class TimedOut(ReadFailure, TimeoutError):
    """The store sent nothing for longer than the timeout."""


def status_phrase(status):
    """``"500 Internal Server Error"`` for 500 (the number alone for an unknown status)."""
    try:
        return f"{status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def status_failure(url, status, tries=1, detail=""):
    """The OSError of an HTTP status that ends a read (after ``tries`` tries).

    404 and 410 are FileNotFoundError; 401 and 403 are AccessDenied; any other is a
    ReadFailure that names the status and the tries.
    """
    if status in (404, 410):
        return FileNotFoundError(errno.ENOENT, "No such file", url)
    detail = f" ({detail})" if detail else ""
    if status in (401, 403):
        return AccessDenied(url, f"access denied (HTTP {status_phrase(status)}){detail}")
    after = f" after {tries} tries" if tries > 1 else ""
    return ReadFailure(url, f"HTTP {status_phrase(status)}{after}{detail}")


def timed_out(url, seconds, what=""):
    """The TimedOut of a request that waited ``seconds`` (None: unknown) for the store."""
    after = f" after {seconds:g} s" if seconds is not None else ""
    return TimedOut(url, f"timed out{after}{f' ({what})' if what else ''}")


def _named(error, *names):
    """True when ``error``'s class, or one of its bases, has one of ``names``."""
    return any(cls.__name__ in names for cls in type(error).__mro__)


_LONGEST_DETAIL = 160  # characters of a store's own message kept in a reason


def short_text(error):
    """The first line of ``error``'s message (or its class name), redacted and cut short: a
    server's message may hold anything, even the bytes it sent."""
    lines = str(error).strip().splitlines()
    text = redact(lines[0].strip().rstrip(":")) if lines else ""
    if len(text) > _LONGEST_DETAIL:
        text = text[:_LONGEST_DETAIL - 3] + "..."
    return text or type(error).__name__


def _boto_response(error):
    """The botocore error response behind an s3fs error, or None."""
    for candidate in (error, error.__cause__, error.__context__):
        response = getattr(candidate, "response", None)
        if isinstance(response, dict) and "Error" in response:
            return response
    return None


def range_refused(error):
    """True for the error of a range request that the store refused as not satisfiable (S3
    and GCS say so of any range of an empty object)."""
    if not isinstance(error, Exception) or isinstance(error, FileNotFoundError):
        return False
    response = _boto_response(error)
    if response is not None:
        return response["Error"].get("Code") == "InvalidRange" or \
            response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 416
    return getattr(error, "code", None) == 416 or getattr(error, "status", None) == 416


def _timeout_of(fs):
    """``(seconds, what)`` of the timeout a store's requests run under, as far as is known."""
    if fs is None:
        return None, ""
    if hasattr(fs, "requests_timeout"):  # gcsfs: a whole request
        value = fs.requests_timeout
        seconds = getattr(value, "total", value)
        return (seconds if seconds is not None else _AIOHTTP_TOTAL_TIMEOUT), \
            "gcsfs requests_timeout"
    if hasattr(fs, "read_timeout") and hasattr(fs, "config_kwargs"):  # s3fs: each read
        return fs.config_kwargs.get("read_timeout", fs.read_timeout), "read_timeout"
    return None, ""


def explain(error, url, fs=None):
    """The OSError to report for ``error``, raised while reading (or asking about) ``url``.

    Errors already understood (ReadFailure, FileNotFoundError, IsADirectoryError, ...) come
    back as they are; gcsfs', s3fs', aiohttp's and botocore's become a FileNotFoundError, an
    AccessDenied, a TimedOut or a ReadFailure that says what the store answered.

    Args:
        error: the exception.
        url: the file.
        fs: the fsspec filesystem it came from (names the timeout that ran out), or None.
    """
    if isinstance(error, (ReadFailure, FileNotFoundError, IsADirectoryError)):
        return error
    response = _boto_response(error)
    if response is not None:  # s3fs: botocore's answer is the cause
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        tries = response.get("ResponseMetadata", {}).get("RetryAttempts", 0) + 1
        code = str(response["Error"].get("Code", ""))
        message = response["Error"].get("Message", "")
        detail = ": ".join(p for p in (code if not code.isdigit() else "", message) if p)
        if code in ("NoSuchKey", "NoSuchBucket", "404"):
            return FileNotFoundError(errno.ENOENT, message or "No such file", url)
        if isinstance(error, PermissionError) or status in (401, 403):
            return AccessDenied(url, f"access denied ({detail or status_phrase(status)})")
        if status:
            phrase = status_phrase(status).split(" ", 1)[-1]
            return status_failure(url, status, tries,
                                  detail if detail and detail != phrase else "")
    if _named(error, "HttpError") and isinstance(getattr(error, "code", None), int):  # gcsfs
        gcsfs = sys.modules.get("gcsfs")
        tries = getattr(getattr(gcsfs, "GCSFileSystem", None), "retries", 1) \
            if error.code in _GCSFS_RETRIED else 1
        return status_failure(url, error.code, tries)
    if _named(error, "ProxyError") and not str(error):  # how gcsfs reports a 502
        gcsfs = sys.modules.get("gcsfs")
        return status_failure(url, 502, getattr(getattr(gcsfs, "GCSFileSystem", None),
                                                "retries", 1))
    if isinstance(error, OSError) and str(error).startswith("Forbidden:"):  # gcsfs' 403
        return status_failure(url, 403)
    if isinstance(error, PermissionError):
        return AccessDenied(url, f"access denied ({short_text(error)})")
    if credentials_problem(error):
        return AccessDenied(url, f"no usable credentials ({short_text(error)})")
    if _named(error, "ConnectTimeoutError", "ConnectionTimeoutError"):
        seconds, _ = _timeout_of(fs)
        return timed_out(url, None if fs is None else seconds, "connecting")
    if isinstance(error, TimeoutError) or _named(error, "ReadTimeoutError", "FSTimeoutError",
                                                 "ServerTimeoutError", "TimeoutError"):
        seconds, what = _timeout_of(fs)
        return timed_out(url, seconds, what)
    if _named(error, "ClientConnectionError", "EndpointConnectionError",
              "ConnectionClosedError", "ClientPayloadError") or \
            isinstance(error, ConnectionError):
        return ReadFailure(url, f"connection failed ({short_text(error)})")
    return error


_CREDENTIAL_ERRORS = ("NoCredentialsError", "PartialCredentialsError",
                      "CredentialRetrievalError", "DefaultCredentialsError", "RefreshError",
                      "NoAuthTokenError", "UnauthorizedSSOTokenError", "TokenRetrievalError")


def credentials_problem(error):
    """True for an error that says the store's credentials are missing or were refused."""
    if _named(error, *_CREDENTIAL_ERRORS):
        return True
    response = _boto_response(error)
    code = response["Error"].get("Code") if response else ""
    return code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
                    "InvalidToken", "AuthFailure")


_HINTS = {
    "s3": "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or pass "
          "--storage-options '{\"anon\": true}' for a public bucket",
    "gs": "run `gcloud auth application-default login`, set GOOGLE_APPLICATION_CREDENTIALS, "
          "or pass --storage-options '{\"token\": \"anon\"}' for a public bucket",
}


def _protocol_of(error):
    """The object store an error comes from, by the package that raised it, or ""."""
    for cls in type(error).__mro__:
        module = cls.__module__.split(".")[0]
        if module in ("botocore", "aiobotocore", "s3fs", "boto3"):
            return "s3"
        if module in ("google", "gcsfs"):
            return "gs"
    return ""


def one_line(error, urls=()):
    """A one-line message for an error of a store (for the command line), or None when
    ``error`` is no store's error; URLs in it are redacted.

    Args:
        error: the exception.
        urls: the URLs the command works on; the one of the error's store is named when the
            error itself names none, and says which credentials to look at.
    """
    urls = [str(u) for u in urls if u]
    protocol = _protocol_of(error)
    where = next((u for u in urls if _store_of(u) == protocol), "") if protocol else \
        next((u for u in urls if "://" in u), "")
    protocol = protocol or _store_of(where)
    prefix = f"{redact(where)}: " if where else ""
    if credentials_problem(error):
        hint = _HINTS.get(protocol, "check the credentials in --storage-options")
        response = _boto_response(error)
        code = f"{response['Error'].get('Code')}: " if response else ""
        return f"{prefix}credentials missing or refused ({code}{short_text(error)}); {hint}"
    is_store_error = isinstance(error, OSError) or _named(
        error, "BotoCoreError", "ClientError", "HttpError", "GoogleAuthError",
        "RequestException")
    if not is_store_error:
        return None
    explained = explain(error, where)
    if isinstance(explained, AccessDenied) and protocol in _HINTS:
        return f"{explained}; check the credentials: {_HINTS[protocol]}"
    if isinstance(explained, ReadFailure):
        return str(explained)
    text = " ".join(redact(str(explained)).split()) or type(explained).__name__
    return text if not where or redact(where) in text else prefix + text


def _store_of(url):
    """``"s3"``, ``"gs"``, another URL scheme, or "" for a local path."""
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    return {"s3a": "s3", "gcs": "gs"}.get(scheme, scheme)


def bucket_of(url):
    """``(protocol, bucket)`` of an object-store URL, or None for any other URL."""
    match = re.match(r"^(gs|gcs|s3|s3a)://([^/?#]+)", str(url))
    return (match.group(1), match.group(2)) if match else None


def missing_bucket(url, fs):
    """A FileNotFoundError naming the bucket of ``url`` when that bucket does not exist,
    else None (also when asking fails)."""
    found = bucket_of(url)
    if found is None:
        return None
    protocol, bucket = found
    try:
        exists = fs.exists(bucket)
    except Exception:  # cannot tell: the caller's own error stands
        return None
    if exists:
        return None
    return FileNotFoundError(f"{redact(url)}: the bucket {protocol}://{bucket} does not exist "
                             "(create it first, or check its name)")
