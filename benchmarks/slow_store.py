"""A static file server on 127.0.0.1 that answers like an object store seen from a training host:
a fixed latency before every response, Range requests, and a bandwidth cap per connection.

Usage: ``python benchmarks/slow_store.py ROOT LATENCY_S MBPS``. It prints its port on the first
line of stdout and serves ``ROOT`` until its stdin closes; ``GET /__stats`` answers
``{"requests": n, "bytes": n}``: the requests answered and the body bytes sent so far.

Copied from the project's shared tools (``slow_store.py``, the lead's stand-in for a bucket) so
that the benchmarks do not depend on that folder; tidied, with two changes: bytes are counted as
they are sent (a response cut short counts what it sent), and the listen backlog is 128 (a real
store does not refuse a reader's concurrent connections).
"""

import json
import os
import re
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

CHUNK = 256 * 1024


class Stats:
    """Requests answered and body bytes sent, shared by the server's threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {"requests": 0, "bytes": 0}

    def add(self, requests=0, sent=0):
        with self.lock:
            self.counts["requests"] += requests
            self.counts["bytes"] += sent

    def json(self):
        with self.lock:
            return json.dumps(self.counts).encode()


def byte_range(header, size):
    """``(start, end, partial)`` of a ``Range: bytes=a-b`` header (``end`` inclusive)."""
    match = re.match(r"bytes=(\d*)-(\d*)", header or "")
    if not match:
        return 0, size - 1, False
    first, last = match.groups()
    if first:
        start, end = int(first), int(last) if last else size - 1
    else:
        start, end = size - int(last), size - 1
    return start, min(end, size - 1), True


def handler(root, latency, bytes_per_second, stats):
    """The request handler class serving ``root`` slowly."""

    class SlowHandler(SimpleHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=root, **kwargs)

        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path == "/__stats":
                body = stats.json()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.answer(body=True)

        def do_HEAD(self):
            self.answer(body=False)

        def answer(self, body):
            time.sleep(latency)
            path = self.translate_path(self.path)
            if not os.path.isfile(path):
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            size = os.path.getsize(path)
            start, end, partial = byte_range(self.headers.get("Range"), size)
            length = max(0, end - start + 1)
            self.send_response(206 if partial else 200)
            self.send_header("Content-Length", str(length))
            self.send_header("Accept-Ranges", "bytes")
            if partial:
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.end_headers()
            stats.add(requests=1)
            if body:
                self.send_slowly(path, start, length)

        def send_slowly(self, path, start, length):
            """Send ``length`` bytes of ``path`` from ``start`` at no more than the cap."""
            began, sent = time.perf_counter(), 0
            with open(path, "rb") as f:
                f.seek(start)
                while sent < length:
                    chunk = f.read(min(CHUNK, length - sent))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    sent += len(chunk)
                    stats.add(sent=len(chunk))
                    lag = sent / bytes_per_second - (time.perf_counter() - began)
                    if lag > 0:
                        time.sleep(lag)

    return SlowHandler


class Server(ThreadingHTTPServer):
    """A thread per connection, up to 128 connections waiting to be accepted."""

    daemon_threads = True
    request_queue_size = 128


def main():
    root, latency, mbps = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    stats = Stats()
    server = Server(("127.0.0.1", 0), handler(root, latency, mbps * 1e6, stats))
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sys.stdin.read()
    finally:
        print("served", stats.json().decode(), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
