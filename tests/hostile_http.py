"""A hostile HTTP server on 127.0.0.1 for the tests, in a child process of its own.

``python hostile_http.py --root FOLDER`` serves on an ephemeral port, prints ``PORT <n>`` and
serves until its standard input closes. The first part of a request's path says how to behave;
the last part names a file in FOLDER (``/chunked/a.jpg`` serves ``FOLDER/a.jpg``). The
behaviour may also come later in the path, so that gcsfs and s3fs pointed at this server find
it in their bucket's name (``gs://status-500/a.jpg``):

- ``/ok/NAME``: the file, with Content-Length; honours ``Range``.
- ``/ignores-range/NAME``: the file whole, with Content-Length, whatever ``Range`` asks.
- ``/chunked/NAME``: the file sent chunked (no Content-Length, on HEAD either).
- ``/endless/NAME``: 200, no Content-Length, ignores ``Range``: the file, then zeros for ever
  (until the client hangs up); ``/endless-chunked/NAME`` the same, chunked.
- ``/liar/NAME``: announces a Content-Length of 1000 and sends the file, then zeros for ever.
- ``/huge/NAME``: announces 10 GB, ignores ``Range``, sends zeros for ever.
- ``/get-only/NAME``: 403 to HEAD (as for a URL signed for GET only), else as ``/ok/``.
- ``/silent/NAME``: reads the request and never answers (the connection stays open).
- ``/drip/NAME``: answers the headers, then sends nothing more.
- ``/reset/NAME``: reads the request and resets the connection (TCP RST).
- ``/flaky/NAME``: 503 with ``Retry-After: 1`` to the first two requests of each method and
  path, then as ``/ok/``.
- ``/flaky-date/NAME``: as ``/flaky/``, with a ``Retry-After`` HTTP date one second ahead.
- ``/slow-down/NAME``: 503 with ``Retry-After: 3600`` for ever.
- ``/status-CODE/NAME``: always that status (401, 403, 404, 500, 502, ...).
- ``/hold/NAME``: as ``/ok/``, but a ranged GET of a shard other than the first
  (``*-00000-of-*``) waits until ``/release`` is asked: a store that has not answered yet.
- An upload (POST, PUT, PATCH, DELETE) is answered as a GET of its path would be.
- ``/counts``: JSON ``{"METHOD /path": requests so far}``; ``/ranges``: JSON ``[[path,
  Range header], ...]`` of the ranged GETs so far; ``/reset-counts`` empties both.

:class:`HostileServer` starts one from Python and stops it (killing it if need be): a request
that hangs here can never take the test session with it.
"""

import argparse
import email.utils
import http.server
import itertools
import json
import os
import pathlib
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter

HOST = "127.0.0.1"
_ZEROS = bytes(64 << 10)


_KINDS = {"ok", "get-only", "ignores-range", "chunked", "endless", "endless-chunked", "liar", "huge",
          "silent", "drip", "reset", "flaky", "flaky-date", "slow-down", "counts",
          "reset-counts", "hold", "release", "ranges"}


def _behaviour(path):
    """``(behaviour, file name)`` of a request path: the first segment naming a behaviour (so
    that gcsfs' and s3fs' request paths work too: ``gs://status-500/a.jpg``), and the last
    segment."""
    segments = [urllib.parse.unquote(s) for s in path.split("/") if s]
    kind = next((s for s in segments if s in _KINDS or re.fullmatch(r"status-\d{3}", s)), "")
    return kind, segments[-1].rsplit("/", 1)[-1] if segments else ""


def _handler(root, counts, lock):
    released = threading.Event()
    ranges = []  # [path, Range header] of each ranged GET

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_HEAD(self):
            self._serve(body=False)

        def do_GET(self):
            self._serve(body=True)

        def _upload(self):  # an upload is answered as a GET of its path would be
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            self.close_connection = True
            self._serve(body=True)

        do_POST = do_PUT = do_PATCH = do_DELETE = _upload

        def _serve(self, body):
            path = self.path.split("?", 1)[0]
            kind, rest = _behaviour(path)
            with lock:
                counts[f"{self.command} {path}"] += 1
                seen = counts[f"{self.command} {path}"]
                if self.command == "GET" and self.headers.get("Range"):
                    ranges.append([path, self.headers["Range"]])
            if kind == "counts":
                return self._send(200, json.dumps(dict(counts)).encode(), body)
            if kind == "ranges":
                with lock:
                    return self._send(200, json.dumps(ranges).encode(), body)
            if kind == "reset-counts":
                with lock:
                    counts.clear()
                    ranges.clear()
                return self._send(200, b"{}", body)
            if kind == "release":
                released.set()
                return self._send(200, b"released\n", body)
            if kind == "hold" and self.command == "GET" and self.headers.get("Range") and \
                    "-00000-of-" not in rest:
                released.wait()
            if kind.startswith("status-"):
                code = kind[len("status-"):]
                return self._send(int(code), f"status {code}\n".encode(), body)
            if kind == "silent":
                while True:
                    time.sleep(3600)
            if kind == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()
                return None
            if kind in ("flaky", "flaky-date") and seen <= 2:
                after = "1" if kind == "flaky" else \
                    email.utils.formatdate(time.time() + 1, usegmt=True)
                return self._send(503, b"busy\n", body, {"Retry-After": after})
            if kind == "get-only" and self.command == "HEAD":
                return self._send(403, b"signed for GET\n", body)
            if kind == "slow-down":
                return self._send(503, b"busy\n", body, {"Retry-After": "3600"})
            if kind == "huge":
                return self._endless(b"", body, {"Content-Length": str(10 ** 10)})
            try:
                with open(os.path.join(root, rest), "rb") as f:
                    data = f.read()
            except OSError:
                return self._send(404, b"not found\n", body)
            if kind == "chunked":
                return self._chunked(data, body)
            if kind == "endless":
                return self._endless(data, body)
            if kind == "endless-chunked":
                return self._endless(data, body, chunked=True)
            if kind == "liar":
                return self._endless(data, body, {"Content-Length": "1000"})
            if kind == "drip":
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.flush()
                while True:
                    time.sleep(3600)
            if kind in ("ok", "get-only", "flaky", "flaky-date", "hold"):
                return self._ranged(data, body)
            if kind == "ignores-range":
                return self._send(200, data, body)
            return self._send(400, b"unknown behaviour\n", body)

        def _send(self, code, data, body, headers=None):
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if body:
                self.wfile.write(data)

        def _ranged(self, data, body):
            wanted = self.headers.get("Range", "")
            if not wanted.startswith("bytes="):
                return self._send(200, data, body, {"Accept-Ranges": "bytes"})
            first, _, last = wanted[6:].partition("-")
            start = int(first)
            end = min(int(last) if last else len(data) - 1, len(data) - 1)
            if start >= len(data):
                return self._send(416, b"", body, {"Content-Range": f"bytes */{len(data)}"})
            return self._send(206, data[start:end + 1], body,
                              {"Content-Range": f"bytes {start}-{end}/{len(data)}"})

        def _chunked(self, data, body):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if not body:
                return
            for i in range(0, len(data), 1000):
                piece = data[i:i + 1000]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")

        def _endless(self, data, body, headers=None, chunked=False):
            self.send_response(200)
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            if not chunked and not headers:
                self.send_header("Connection", "close")  # the body ends when we hang up
            self.end_headers()
            self.close_connection = True
            if not body:
                return
            try:
                for piece in itertools.chain([data], itertools.repeat(_ZEROS)):
                    if piece:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked
                                         else piece)
            except OSError:  # the client hung up, as it should
                pass

    return Handler


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


def serve(root):
    """Start the server on an ephemeral port; returns ``(port, stop)``."""
    counts, lock = Counter(), threading.Lock()
    server = _Server((HOST, 0), _handler(root, counts, lock))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1], server.shutdown


class HostileServer:
    """The hostile server in a child process: ``url`` is its address, ``stop()`` ends it."""

    def __init__(self, root):
        self.root = pathlib.Path(root)
        command = [sys.executable, os.path.abspath(__file__), "--root", str(root)]
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True)
        line = self._process.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"the hostile server did not start (said {line!r})")
        self.port = int(line.split()[1])
        self.url = f"http://{HOST}:{self.port}"

    def counts(self):
        """``{"METHOD /path": requests}`` seen so far."""
        import urllib.request

        with urllib.request.urlopen(f"{self.url}/counts", timeout=10) as response:
            return json.loads(response.read())

    def ranges(self):
        """``[(path, Range header)]`` of the ranged GETs seen so far, in order."""
        import urllib.request

        with urllib.request.urlopen(f"{self.url}/ranges", timeout=10) as response:
            return [tuple(pair) for pair in json.loads(response.read())]

    def reset_counts(self):
        import urllib.request

        urllib.request.urlopen(f"{self.url}/reset-counts", timeout=10).read()

    def release(self):
        """Answer the requests ``/hold/`` holds, and every later one at once."""
        import urllib.request

        urllib.request.urlopen(f"{self.url}/release", timeout=10).read()

    def stop(self):
        if self._process.poll() is None:
            self._process.stdin.close()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:  # a handler that never returns: no matter
                self._process.kill()
                self._process.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=".")
    args = parser.parse_args()
    port, _ = serve(args.root)
    print(f"PORT {port}", flush=True)
    sys.stdin.read()  # until the parent closes our input (or dies)
    os._exit(0)  # handler threads that never return must not hold the exit


if __name__ == "__main__":
    main()
