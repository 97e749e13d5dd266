#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A scripted HTTP/1.1 server on loopback for the HTTP layer's unit tests
(tests/unit/test_http_client.c, test_error_sweep.c).

Usage: http_script.py PORTFILE [CERTFILE KEYFILE]
With a certificate and key it speaks HTTPS. Binds 127.0.0.1 on a free port, writes the port to PORTFILE (atomically)
and serves until killed or until its parent process dies (checked every
200 ms), so a test that crashes leaves no server behind.

Paths (every answer is deliberate; the test asserts what the client makes
of it):
  /ok/N               200, N bytes of a known pattern (keep-alive)
  /conns              200, the number of distinct TCP connections so far
  /once/STATUS/ID     STATUS (with Retry-After: 0) the first time for ID,
                      then 200 "ok"; /hits/ID says how many requests came
  /retry-after/ID     503 with Retry-After: 1 the first time, then 200
  /retry-after-long/ID  503 with Retry-After: 30 the first time, then 200
  /always/STATUS      STATUS every time, with a small body
  /hang               accepts the request, never answers
  /slow/N/MS          200, N chunks of 1 KiB, one every MS ms
  /truncated          Content-Length 1000, 10 bytes, then closes
  /range/MODE/N       N bytes of the pattern, a Range answered with a 206
                      that is: good (what was asked), other (its
                      Content-Range and body start at 0, whatever was
                      asked), capped (honest, at most 16 bytes), eofclose
                      (honest headers, no Content-Length, half the body,
                      then the connection closes; so is a GET without
                      Range, with a 200)
                      (and the other modes of range_faults.py)
  /cut200-N           N bytes of the pattern: HEAD says so (Content-Length
                      N); a GET, Range or not, is a 200 without
                      Content-Length that sends half of them and closes
  /early              (a body) reads 64 KiB of it, answers 201 at once and
                      closes half a second later: an upload acknowledged
                      cut short
  /garbage            a reply that is not HTTP at all
  /badlen             Content-Length: abc
  /bigerror           500 with a 64 KiB body
  /auth               200 for Basic user:secret, else 401
  /echo               (any method with a body) 200, "METHOD LENGTH SUM"
"""
import base64
import ssl  # noqa: F401 (HTTPS when given a certificate)
import sys
import threading
import time

import range_faults  # tests/servers, beside this script
from quiet_handler import QuietHandler, Server, serve  # likewise

hits = {}
conns = set()
lock = threading.Lock()


def pattern(n):
    return bytes((i * 7 + 3) & 0xFF for i in range(n))


class Handler(QuietHandler):

    def count(self, key):
        with lock:
            hits[key] = hits.get(key, 0) + 1
            return hits[key]

    def handle_any(self):
        with lock:
            conns.add(self.client_address)
        p = self.path.split("/")[1:]
        if p[0] == "early":
            self.rfile.read(65536)
            self.send_response(201)
            self.send_header("Content-Length", "0")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
            # the client reads the answer before its send fails
            time.sleep(0.5)
            self.close_connection = True
            return
        body = self.read_body() if self.headers.get("Content-Length") else b""
        if p[0] == "ok":
            self.reply(200, pattern(int(p[1])), [("ETag", '"v1"')])
        elif p[0] == "conns":
            with lock:
                n = len(conns)
            self.reply(200, str(n).encode())
        elif p[0] == "once":
            n = self.count(p[2])
            if n == 1:
                self.reply(int(p[1]), b"try again", [("Retry-After", "0")])
            else:
                self.reply(200, b"ok")
        elif p[0] == "retry-after":
            n = self.count(p[1])
            if n == 1:
                self.reply(503, b"busy", [("Retry-After", "1")])
            else:
                self.reply(200, b"ok")
        elif p[0] == "retry-after-long":
            n = self.count(p[1])
            if n == 1:
                self.reply(503, b"busy", [("Retry-After", "30")])
            else:
                self.reply(200, b"ok")
        elif p[0] == "hits":
            with lock:
                n = hits.get(p[1], 0)
            self.reply(200, str(n).encode())
        elif p[0] == "always":
            self.count("always")
            self.reply(int(p[1]), b"status body")
        elif p[0] == "hang":
            self.count("hang")
            time.sleep(3600)
        elif p[0] == "slow":
            n, ms = int(p[1]), int(p[2])
            self.send_response(200)
            self.send_header("Content-Length", str(n * 1024))
            self.end_headers()
            for _ in range(n):
                self.wfile.write(b"s" * 1024)
                self.wfile.flush()
                time.sleep(ms / 1000.0)
        elif p[0] == "truncated":
            self.count("truncated")
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"0123456789")
            self.wfile.flush()
            self.close_connection = True
        elif p[0].startswith("cut200-"):
            self.cut200(pattern(int(p[0][7:])))
        elif p[0] == "range":
            self.range_answer(p[1], pattern(int(p[2])))
        elif p[0] == "garbage":
            self.count("garbage")
            self.wfile.write(b"\x00\x01NOT HTTP AT ALL\r\n\r\n\xff\xfe")
            self.wfile.flush()
            self.close_connection = True
        elif p[0] == "badlen":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n")
            self.wfile.flush()
            self.close_connection = True
        elif p[0] == "bigerror":
            self.reply(500, b"E" * 65536)
        elif p[0] == "auth":
            want = "Basic " + base64.b64encode(b"user:secret").decode()
            if self.headers.get("Authorization") == want:
                self.reply(200, b"welcome")
            else:
                self.reply(401, b"who are you",
                           [("WWW-Authenticate", 'Basic realm="t"')])
        elif p[0] == "echo":
            msg = "%s %d %d" % (self.command, len(body), sum(body) & 0xFFFFFFFF)
            self.reply(200, msg.encode())
        else:
            self.reply(404, b"no such path")

    def cut200(self, data):
        if self.command == "HEAD":
            self.reply(200, data, [("ETag", '"c1"')])
            return
        self.send_response(200)
        self.send_header("ETag", '"c1"')
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data[:len(data) // 2])
        self.wfile.flush()
        self.close_connection = True

    def range_answer(self, mode, data):
        range_faults.answer(self, mode, data, '"v1"')

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = handle_any

    def do_PROPFIND(self):
        self.handle_any()


def main():
    srv = Server(("127.0.0.1", 0), Handler)
    if len(sys.argv) == 4:
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[2], sys.argv[3])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    serve(srv, sys.argv[1])


if __name__ == "__main__":
    main()
