"""Reading http(s):// URLs so that no server can hold a run: streamed, cut at a size limit, an
idle timeout on every request, and a bounded number of tries.

- A body is streamed and cut as soon as it passes the caller's size limit, whatever the
  server announces or sends: no ``Range``, no ``Content-Length``, more bytes than announced, an
  endless body. A size the server announces beyond the limit refuses the file unread.
- Every request gives up after ``timeout`` seconds without a byte from the server (connecting,
  waiting for the answer, or between two pieces of the body): "timed out after 60 s".
- Connection failures and the answers 429, 500, 502, 503 and 504 are tried again, up to
  ``retries`` tries in all, waiting 0.5 s, 1 s, 2 s, ... or what ``Retry-After`` asks; then
  the row gets the real reason ("HTTP 503 Service Unavailable after 3 tries"). A server that
  asks to wait longer than ``MAX_RETRY_AFTER`` is not asked again (the reason says so). A
  timeout is not tried again: it has waited long enough.
- 404 and 410 are "file not found"; 401 and 403 are "access denied".

Both settings come from the http(s) storage options, ``{"timeout": 60, "retries": 3}``
(``retries`` counts tries in all, as s3fs does); the other options (``headers``,
``client_kwargs``, ...) are fsspec's and reach every request. fsspec's own http requests (a
listing, a shard opened by ``load``) get the same idle timeout through their session.
"""

import asyncio
import email.utils
import random
import tempfile
import time
from dataclasses import dataclass

from .errors import ReadFailure, short_text, status_failure, timed_out, too_large

DEFAULT_TIMEOUT = 60.0  # seconds without a byte from the server
DEFAULT_TRIES = 3
MAX_RETRY_AFTER = 30.0  # the longest wait between two tries, whatever Retry-After asks
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
_FIRST_BACKOFF = 0.5
_PIECE = 1 << 16
SPOOL_BYTES = 1 << 20  # of a body of unknown length, what stays in memory while it arrives
_OWN_OPTIONS = ("timeout", "retries")


@dataclass(frozen=True)
class HttpSettings:
    """How long and how often an http(s) server is asked.

    Attributes:
        timeout: seconds without a byte from the server before a request gives up.
        tries: requests in all for one file, the first included.
    """

    timeout: float = DEFAULT_TIMEOUT
    tries: int = DEFAULT_TRIES


def settings(options):
    """The HttpSettings of the http(s) storage options ``options`` (a dict, or None).

    Raises:
        ValueError: a timeout that is not a positive number, or tries that are not a positive
            integer.
    """
    options = options or {}
    timeout = options.get("timeout", DEFAULT_TIMEOUT)
    tries = options.get("retries", DEFAULT_TRIES)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"storage option timeout: expected seconds (a number > 0), not "
                         f"{timeout!r}")
    if isinstance(tries, bool) or not isinstance(tries, int) or tries < 1:
        raise ValueError(f"storage option retries: expected the tries in all (an integer "
                         f">= 1), not {tries!r}")
    return HttpSettings(float(timeout), tries)


def fsspec_options(options):
    """The options to build fsspec's HTTPFileSystem with: ours taken out, and the idle timeout
    given to its session (unless ``client_kwargs`` sets one)."""

    options = dict(options or {})
    chosen = settings(options)
    for key in _OWN_OPTIONS:
        options.pop(key, None)
    client = dict(options.get("client_kwargs") or {})
    client.setdefault("timeout", _client_timeout(chosen))
    options["client_kwargs"] = client
    return options


def _client_timeout(chosen):
    import aiohttp

    return aiohttp.ClientTimeout(total=None, sock_connect=chosen.timeout,
                                 sock_read=chosen.timeout)


def _retry_after(value):
    """Seconds a ``Retry-After`` header asks to wait (a number or an HTTP date), or None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _Transient(Exception):
    """A failure worth another try: the answer's status (or None) and what to wait."""

    def __init__(self, status=None, wait=None, cause=None):
        super().__init__(status)
        self.status, self.wait, self.cause = status, wait, cause


def _wait_before(attempt, asked):
    """Seconds to wait before try ``attempt + 1``: what the server asked, else exponential
    backoff with jitter."""
    if asked is not None:
        return asked
    return min(_FIRST_BACKOFF * 2 ** (attempt - 1), MAX_RETRY_AFTER) * random.uniform(0.5, 1)


async def _with_tries(url, chosen, attempt):
    """Run ``attempt()`` up to ``chosen.tries`` times while it fails transiently.

    Returns:
        What ``attempt`` returned.

    Raises:
        OSError: a ReadFailure, AccessDenied, TimedOut or FileNotFoundError that says why.
    """
    import aiohttp

    for number in range(1, chosen.tries + 1):
        try:
            return await attempt()
        except _Transient as exc:
            failure = exc
        except aiohttp.ConnectionTimeoutError:
            raise timed_out(url, chosen.timeout, "connecting") from None
        except (aiohttp.ServerTimeoutError, asyncio.TimeoutError):
            raise timed_out(url, chosen.timeout) from None
        except (aiohttp.ClientConnectorCertificateError, aiohttp.ClientSSLError) as exc:
            raise ReadFailure(url, f"TLS failed ({short_text(exc)})") from None
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError,
                ConnectionError) as exc:
            failure = _Transient(cause=exc)
        except aiohttp.TooManyRedirects:
            raise ReadFailure(url, "too many redirects") from None
        except aiohttp.ClientResponseError as exc:  # not ours: the answer did not parse
            raise ReadFailure(url, f"invalid HTTP answer ({short_text(exc.message)}; more "
                                   "bytes than announced?)") from None
        except aiohttp.ClientError as exc:
            raise ReadFailure(url, f"HTTP request failed ({short_text(exc)})") from None
        if failure.wait is not None and failure.wait > MAX_RETRY_AFTER:
            raise status_failure(url, failure.status, number,
                                 f"the server asks to wait {failure.wait:.0f} s; "
                                 f"tfrecorder_lite waits at most {MAX_RETRY_AFTER:.0f} s")
        if number < chosen.tries:
            await asyncio.sleep(_wait_before(number, failure.wait))
    after = f" after {chosen.tries} tries" if chosen.tries > 1 else ""
    if failure.status is not None:
        raise status_failure(url, failure.status, chosen.tries)
    raise ReadFailure(url, f"connection failed{after} ({short_text(failure.cause)})")


def _check_status(response, url):
    """Raise for an answer that is not a success: _Transient for one worth another try."""
    status = response.status
    if status < 300:
        return
    if status in TRANSIENT_STATUSES:
        raise _Transient(status, _retry_after(response.headers.get("Retry-After")))
    raise status_failure(url, status)


def _empty(response):
    """True for the answer "range not satisfiable" to bytes from 0: the file is empty."""
    total = response.headers.get("Content-Range", "").rpartition("/")[2].strip()
    return response.status == 416 and total in ("", "0")


def _encoded(response):
    """True when the body is compressed for the transfer (its Content-Length is not the
    file's size, and what it expands to is not known before it is read)."""
    return response.headers.get("Content-Encoding", "identity").strip().lower() not in \
        ("identity", "")


def _total_size(response):
    """The size of the whole file as the answer announces it (Content-Range's total, or the
    Content-Length of a whole, unencoded body), or None."""
    if _encoded(response):
        return None
    total = response.headers.get("Content-Range", "").rpartition("/")[2].strip()
    if total.isdigit():
        return int(total)
    length = response.headers.get("Content-Length", "").strip()
    return int(length) if response.status == 200 and length.isdigit() else None


def _body_length(response):
    """The bytes the body holds, when the answer says so (the client reads no more), or None
    (chunked, until the server hangs up, or compressed)."""
    length = response.headers.get("Content-Length", "").strip()
    return int(length) if length.isdigit() and not _encoded(response) else None


async def read(fs, url, max_bytes=None, chosen=HttpSettings()):
    """The bytes of ``url``, streamed and cut at ``max_bytes`` (None: no limit).

    A body of announced length is gathered in memory; any other (chunked, until the server
    hangs up, compressed) goes to a temporary file first, of which at most ``SPOOL_BYTES``
    stay in memory, and is read back only once whole and within the limit: many endless
    bodies at once cost disk writes, not memory.

    Args:
        fs: fsspec's HTTPFileSystem (its session and request options are used).
        url: the http(s) URL.
        max_bytes: the most bytes accepted; a larger file is a FileTooLarge (with its size
            when the server announced one).
        chosen: the HttpSettings.

    Raises:
        OSError: why the file could not be read (see :func:`_with_tries`), or FileTooLarge.
    """
    session = await fs.set_session()
    request = dict(fs.kwargs)
    headers = dict(request.pop("headers", None) or {})
    if max_bytes is not None:
        headers["Range"] = f"bytes=0-{max_bytes}"  # one byte more than allowed: seen as too large

    async def attempt():
        async with session.get(fs.encode_url(url), headers=headers,
                               timeout=_client_timeout(chosen), **request) as response:
            if _empty(response):
                return b""
            _check_status(response, url)
            announced = _total_size(response)
            if max_bytes is not None and announced is not None and announced > max_bytes:
                raise too_large(url, announced, max_bytes)
            with tempfile.SpooledTemporaryFile(SPOOL_BYTES, prefix="tfrecorder_lite-") as spool:
                sink = [] if _body_length(response) is not None else spool
                received = 0
                async for piece in response.content.iter_chunked(_PIECE):
                    received += len(piece)
                    if max_bytes is not None and received > max_bytes:
                        raise too_large(url, announced, max_bytes)  # the connection is dropped
                    sink.append(piece) if isinstance(sink, list) else sink.write(piece)
                if isinstance(sink, list):
                    return b"".join(sink)
                spool.seek(0)
                return spool.read()

    return await _with_tries(url, chosen, attempt)


async def info(fs, url, chosen=HttpSettings()):
    """fsspec's ``info`` of ``url`` (name, size or None, type, ETag, Last-Modified, ...),
    asked with HEAD, or when that says no size, with a GET whose body is not read.

    Raises:
        OSError: why the file could not be asked about (see :func:`_with_tries`).
    """
    session = await fs.set_session()
    request = dict(fs.kwargs)
    headers = {**(request.pop("headers", None) or {}), "Accept-Encoding": "identity"}
    found = {}

    async def ask(method, extra):
        async with session.request(method, fs.encode_url(url), headers={**headers, **extra},
                                   timeout=_client_timeout(chosen), allow_redirects=True,
                                   **request) as response:
            if method == "HEAD" and (400 <= response.status < 500 and
                                     response.status not in (404, 410, 429) or
                                     response.status == 501):
                return None  # HEAD refused (a URL signed for GET only, ...): ask with GET
            if _empty(response):
                return {"size": 0}
            _check_status(response, url)
            described = {"size": _total_size(response), "url": str(response.url)}
            if "Content-Type" in response.headers:
                described["mimetype"] = response.headers["Content-Type"].partition(";")[0]
            for key in ("ETag", "Content-MD5", "Digest", "Last-Modified"):
                if response.headers.get(key):
                    described[key] = response.headers[key]
            return described  # leaving the block drops an unread body with its connection

    for method, extra in (("HEAD", {}), ("GET", {"Range": "bytes=0-0"})):
        answer = await _with_tries(url, chosen, lambda: ask(method, extra))
        if answer is not None:
            found.update({k: v for k, v in answer.items() if v is not None})
            if found.get("size") is not None:
                break
    return {"name": url, "size": None, **found, "type": "file"}
