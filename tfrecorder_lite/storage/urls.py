"""Paths and URLs: what they name, how relative ones resolve, and the fsspec filesystem (with
its options) of each URL scheme.

Local paths and ``file://`` URLs name the local disk; any other scheme goes through fsspec
(``gs://`` gcsfs, ``s3://`` s3fs, ``http(s)://``, ``memory://``, ...).
"""

import functools
import os
import posixpath
from urllib.parse import unquote, urlparse

from ..errors import MissingDependencyError, UnsupportedURLError
from .http import fsspec_options as http_fsspec_options

_EXTRAS = {"gs": "gcs", "gcs": "gcs", "s3": "s3", "s3a": "s3", "http": "http", "https": "http"}
READ_ONLY = frozenset({"http", "https"})  # schemes that can be read, never written


def protocol_of(uri):
    """The URL scheme of ``uri`` in lower case; ``"file"`` for plain paths."""
    uri = str(uri)
    scheme, sep, _ = uri.partition("://")
    return scheme.lower() if sep and scheme.isidentifier() else "file"


def is_remote(uri):
    """True when ``uri`` names something other than the local disk."""
    return protocol_of(uri) != "file"


@functools.lru_cache(maxsize=None)
def _filesystem_class(protocol):
    import fsspec

    try:
        return fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise UnsupportedURLError(
            f"unsupported URL scheme '{protocol}://' (not a protocol fsspec knows)") from None
    except ImportError as exc:
        extra = _EXTRAS.get(protocol)
        hint = f"pip install 'tfrecorder_lite[{extra}]'" if extra else str(exc)
        raise MissingDependencyError(
            f"{protocol}:// URLs need a package that is not installed: {hint}") from None


def check_url(uri):
    """Raise a clear error now, before anything is read or written, for an unusable URL.

    Raises:
        UnsupportedURLError: a scheme no installed fsspec filesystem knows.
        MissingDependencyError: the filesystem package is missing (names the extra to install).
    """
    protocol = protocol_of(uri)
    if protocol != "file":
        _filesystem_class(protocol)


def resolve(uri, base=None):
    """An absolute local path, or a URL, for ``uri``.

    Args:
        uri: a local path (relative or absolute), a ``file://`` URL or any fsspec URL.
        base: the folder (path or URL) that relative paths resolve against; default: the
            working folder.

    Raises:
        UnsupportedURLError: for a scheme that no fsspec filesystem knows.
    """
    uri = os.fspath(uri) if isinstance(uri, os.PathLike) else str(uri)
    protocol = protocol_of(uri)
    if protocol == "file":
        if "://" in uri:
            uri = file_url_path(uri)
        path = os.path.expanduser(uri)
        if os.path.isabs(path):
            return os.path.normpath(path)
        if base is not None and is_remote(base):
            scheme, _, rest = str(base).partition("://")
            return f"{scheme}://{posixpath.normpath(posixpath.join(rest, uri.replace(os.sep, '/')))}"
        return os.path.normpath(os.path.join(base or os.getcwd(), path))
    check_url(uri)
    return uri


def normalized(uri):
    """``uri`` spelled one way: a local path normalized (``./a.jpg``, ``a.jpg/`` and
    ``x/../a.jpg`` are ``a.jpg``; relative paths stay relative), a URL with its path
    normalized the same way (its query kept). Two spellings of one file compare equal."""
    uri = os.fspath(uri) if isinstance(uri, os.PathLike) else str(uri)
    if protocol_of(uri) == "file" and "://" not in uri:
        return os.path.normpath(uri) if uri else uri
    scheme, _, rest = uri.partition("://")
    path, mark, query = rest.partition("?") if scheme.lower() in READ_ONLY else (rest, "", "")
    host, slash, path = path.partition("/") if scheme.lower() != "file" else ("", "", path)
    path = posixpath.normpath("/" + path).lstrip("/") if path else ""
    return f"{scheme.lower()}://{host}{slash}{path}{mark}{query}"


def is_within(uri, folder):
    """True when ``uri``, resolved against ``folder`` and normalized (``..`` climbs; in an
    http(s) URL, ``%2e%2e`` too), names ``folder`` or something below it, on the same store:
    what an annotation file may name without its user's leave.

    Raises:
        UnsupportedURLError: for a scheme that no fsspec filesystem knows.
    """
    folder = resolve(folder)
    uri = resolve(uri, base=folder)
    if protocol_of(uri) != protocol_of(folder):
        return False
    if not is_remote(uri):
        return os.path.commonpath([uri, folder]) == folder
    inside, top = (_comparable(u) for u in (uri, folder))
    return inside == top or inside.startswith(top.rstrip("/") + "/")


def _comparable(url):
    """A URL's host and path, normalized, percent-escapes decoded for http(s) (servers decode
    them), query left out."""
    scheme, _, rest = url.partition("://")
    if scheme.lower() in READ_ONLY:
        parts = urlparse(url)
        rest = parts.netloc.lower() + unquote(parts.path)
    host, _, path = rest.partition("/")
    return f"{host}/{posixpath.normpath('/' + path).lstrip('/')}"


def file_url_path(url):
    """The local path a ``file://`` URL names, percent-decoded (``%23`` is ``#``, ``%3F`` is
    ``?``, ``%25`` is ``%``).

    Raises:
        UnsupportedURLError: for a URL with a query or a fragment (a ``#`` or ``?`` not
            percent-encoded, which would cut the path there), or naming another host.
    """
    parts = urlparse(url)
    if parts.query or parts.fragment or "#" in url or "?" in url:
        raise UnsupportedURLError(
            f"{url}: a file:// URL ends its path at '?' or '#'; write a '?' or '#' of a file "
            "name as %3F or %23 (or give the plain path)")
    if parts.netloc not in ("", "localhost"):
        raise UnsupportedURLError(f"{url}: a file:// URL names a file of this machine "
                                  f"(file:///path), not of the host '{parts.netloc}'")
    return unquote(parts.path)


def is_relative(uri):
    """True for a relative local path (one that :func:`resolve` joins to a base folder)."""
    uri = str(uri)
    return protocol_of(uri) == "file" and "://" not in uri and \
        not os.path.isabs(os.path.expanduser(uri))


def relative_path_hint(uri, path, base=None):
    """For a relative ``uri`` resolved to ``path``: the words that say where it was looked
    for, to add to a "file not found"; "" for any other URI."""
    if not is_relative(uri):
        return ""
    against = f"base_dir {base}" if base is not None else f"the working folder {os.getcwd()}"
    return f" (looked for {path}: the relative path {uri} was resolved against {against})"


def parent(uri):
    """The folder holding ``uri`` (a path or URL)."""
    if is_remote(uri):
        return uri.rstrip("/").rsplit("/", 1)[0]
    return os.path.dirname(uri)


def basename(uri):
    """The last component of a path or URL (an http(s) URL's query string left out; in object
    names, ``?`` and ``#`` are ordinary characters)."""
    if not is_remote(uri):
        return os.path.basename(uri)
    if protocol_of(uri) in READ_ONLY:
        uri = urlparse(uri).path
    return uri.rstrip("/").rsplit("/", 1)[-1]


def options_for(protocol, storage_options):
    """The fsspec options of one protocol.

    ``storage_options`` is either one dict for every remote URL of a call (pandas' convention),
    or, when a call touches two protocols, a dict keyed by protocol (fsspec's convention for
    chained URLs): ``{"s3": {"anon": True}, "gs": {"token": "cred.json"}}``.
    """
    if not storage_options:
        return {}
    names = set(_filesystem_class(protocol).protocol) if protocol != "file" else {"file"}
    names.add(protocol)
    if _keyed_by_protocol(storage_options):
        for key, options in storage_options.items():
            if key in names:
                return dict(options)
        return {}
    return dict(storage_options)


def _keyed_by_protocol(storage_options):
    import fsspec

    known = set(fsspec.available_protocols()) | {"file"}
    return all(isinstance(v, dict) and k in known for k, v in storage_options.items())


def filesystem(protocol, storage_options=None):
    """The (cached) fsspec filesystem of ``protocol`` with the options meant for it (for
    http(s), those of :mod:`~tfrecorder_lite.storage.http` taken out)."""
    import fsspec

    check_url(f"{protocol}://")
    options = options_for(protocol, storage_options)
    if protocol in READ_ONLY:
        options = http_fsspec_options(options)
    return fsspec.filesystem(protocol, **options)
