# SPDX-License-Identifier: MIT
"""The request handler the scripted test servers build on (dav_hostile.py,
s3_hostile.py, http_script.py): HTTP/1.1 keep-alive, no access log on
stderr, and the two helpers each of them wrote out again.

reply(status, body, headers): a whole answer with its Content-Length (no
body sent to a HEAD).
read_body(): the request's body, as many bytes as its Content-Length says
or as many as came before the client closed.

Server: threaded, quiet about clients that hang up. serve(srv, portfile):
writes the port to @portfile (atomically: the test waits for the file)
and serves until the process that started this one is gone.
"""
import http.server
import os
import socketserver
import threading
import time


class QuietHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        data = b""
        while len(data) < n:
            chunk = self.rfile.read(min(65536, n - len(data)))
            if not chunk:
                break
            data += chunk
        return data


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # a client that hung up (cancel, timeout) is expected


def serve(srv, portfile):
    parent = os.getppid()
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, portfile)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    while os.getppid() == parent:
        time.sleep(0.2)
    srv.shutdown()
