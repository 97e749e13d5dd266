# SPDX-License-Identifier: MIT
"""The request handler the scripted test servers build on (dav_hostile.py,
s3_hostile.py, http_script.py): HTTP/1.1 keep-alive, no access log on
stderr, and the two helpers each of them wrote out again.

reply(status, body, headers): a whole answer with its Content-Length (no
body sent to a HEAD).
read_body(): the request's body, as many bytes as its Content-Length says
or as many as came before the client closed.
"""
import http.server


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
