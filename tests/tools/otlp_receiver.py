#!/usr/bin/env python3
"""otlp_receiver.py DIR - a small receiver of JSON POSTs for tests: OTLP/
HTTP JSON traces and event webhooks.

Listens on 127.0.0.1 on a free port (written to DIR/port once it is
ready), takes POST /v1/traces (a JSON ExportTraceServiceRequest: each body
appended as one line to DIR/traces.jsonl) and POST to any other path (each
body appended to DIR/posts.jsonl), and answers 200 {}. A body that is not
JSON is 400 (and kept in DIR/bad). Runs until killed.
"""
import http.server
import json
import os
import sys

DIR = sys.argv[1]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        name = "traces.jsonl" if self.path == "/v1/traces" else "posts.jsonl"
        try:
            json.loads(body)
        except ValueError:
            with open(os.path.join(DIR, "bad"), "ab") as f:
                f.write(body + b"\n")
            self.send_error(400)
            return
        with open(os.path.join(DIR, name), "ab") as f:
            f.write(body.replace(b"\n", b" ") + b"\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(os.path.join(DIR, "port.tmp"), "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(os.path.join(DIR, "port.tmp"), os.path.join(DIR, "port"))
srv.serve_forever()
