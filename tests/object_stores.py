"""Real protocol servers on 127.0.0.1 for the tests and the benchmark, each in a child process.

``python object_stores.py KIND [--latency SECONDS] [--root FOLDER]`` starts one server on an
ephemeral port, prints ``PORT <n>`` and serves until its standard input closes. KIND is ``gcs``
(gcp-storage-emulator, the GCS JSON API), ``s3`` (moto's server) or ``http`` (a folder served by
``http.server``). ``--latency`` sleeps that long in every request, like a distant store.

:class:`Server` starts one from Python and stops it; a crash or hang of a server cannot take the
caller with it.
"""

import argparse
import functools
import os
import subprocess
import sys
import threading
import time

HOST = "127.0.0.1"


def _delayed(method, latency):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        time.sleep(latency)
        return method(*args, **kwargs)
    return wrapper


def _serve_gcs(latency, root):
    import http.server

    from gcp_storage_emulator import server, storage

    # The emulator serves one request at a time with a listen backlog of 5: concurrent clients
    # get connection resets and retry after seconds, and an injected delay would serialize.
    # Serve each request on a thread of its own, like a real store; changes to its state take
    # a lock (it is not thread-safe), reads run concurrently.
    http.server.ThreadingHTTPServer.request_queue_size = 128
    http.server.ThreadingHTTPServer.daemon_threads = True
    server.server.HTTPServer = http.server.ThreadingHTTPServer
    changes = threading.Lock()
    handle = server.Router.handle

    def handle_in_turn(router, method):
        if method == "GET" and not router._request_handler.headers.get("x-http-method-override"):
            return handle(router, method)
        with changes:
            return handle(router, method)

    server.Router.handle = handle_in_turn
    if latency:
        server.Router.handle = _delayed(server.Router.handle, latency)
    # It rewrites a JSON index of every object on each upload (uploads slow down with the
    # square of the object count); the index is read only at start-up, so an in-memory server
    # has no use for it.
    storage.Storage._write_config_to_file = lambda self: None
    emulator = server.create_server(HOST, 0, in_memory=True)
    emulator.start()
    return emulator._api._httpd.server_address[1], emulator.stop


def _serve_s3(latency, root):
    from moto.server import ThreadedMotoServer
    from werkzeug.serving import WSGIRequestHandler

    if latency:
        WSGIRequestHandler.run_wsgi = _delayed(WSGIRequestHandler.run_wsgi, latency)
    moto = ThreadedMotoServer(ip_address=HOST, port=0, verbose=False)
    moto.start()
    return moto.get_host_and_port()[1], moto.stop


def _serve_http(latency, root):
    import http.server

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=root, **kwargs)

        def log_message(self, *args):
            pass

    if latency:
        Handler.handle_one_request = _delayed(Handler.handle_one_request, latency)
    http.server.ThreadingHTTPServer.request_queue_size = 128  # the default listen backlog is 5
    httpd = http.server.ThreadingHTTPServer((HOST, 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd.server_address[1], httpd.shutdown


class Server:
    """One protocol server in a child process; ``url`` is its address, ``stop()`` ends it."""

    def __init__(self, kind, latency=0.0, root=None):
        command = [sys.executable, os.path.abspath(__file__), kind, "--latency", str(latency)]
        if root is not None:
            command += ["--root", str(root)]
        self.kind = kind
        # the servers log every request and every client that hangs up early: not ours to show
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True)
        line = self._process.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"the {kind} server did not start (said {line!r})")
        self.port = int(line.split()[1])
        self.url = f"http://{HOST}:{self.port}"

    def cpu_seconds(self):
        """CPU time (user + system) the server process has used so far (Linux)."""
        with open(f"/proc/{self._process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        if self._process.poll() is None:
            self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["gcs", "s3", "http"])
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--root", default=".")
    args = parser.parse_args()
    serve = {"gcs": _serve_gcs, "s3": _serve_s3, "http": _serve_http}[args.kind]
    port, stop = serve(args.latency, args.root)
    print(f"PORT {port}", flush=True)
    sys.stdin.read()  # until the parent closes our input (or dies)
    stop()


if __name__ == "__main__":
    main()
