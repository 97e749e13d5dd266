#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""tests/servers/swift_identity.py - a small OpenStack identity v2.0
emulator in front of a real Swift with tempauth, for tests.

It trades RAX-KSKEY API-key credentials (or passwordCredentials) for a
token of its own and answers the documented v2.0 shape: access.token.id /
expires, access.user["RAX-AUTH:defaultRegion"], access.serviceCatalog with
an "object-store" service holding two regions (DFW and ORD), each with a
publicURL and an internalURL. Those URLs point back at this process, which
forwards storage requests to the real Swift's storage URL with the
tempauth token it got for the user, after checking its own token: so a
token can expire (lifetime knob) or be revoked, and storage requests can
be failed on purpose.

Usage: swift_identity.py PORTFILE UPSTREAM_AUTH_URL UPSTREAM_USER
       UPSTREAM_KEY USER APIKEY PASSWORD
The chosen port is written to PORTFILE once the server listens. With
UPSTREAM_AUTH_URL "-" there is no Swift behind it: a storage request with
a valid token is answered by the emulator itself (HEAD: 204, a listing:
[], anything else: 404), enough to test authentication alone.

Control (POST /control, JSON object; every field optional):
  lifetime: seconds new tokens live (default 3600)
  revoke: true - every token issued so far is refused from now on
  refuse_auth: true/false - answer 401 to every auth request
  default_region: region named as the user's default ("" drops it)
  fail: {"status": 503, "count": 2, "target": "storage"|"auth",
         "retry_after": 0} - answer the next COUNT requests of TARGET
  listing: JSON text answered to every container listing (a stale,
         eventually consistent listing); null: forward them again
  outage: {"seconds": 10, "status": 503} - every storage request with a
         valid token is answered STATUS (default 503) for SECONDS from
         now: Swift unavailable for a while, by time rather than count
GET /control/stats also answers "outage_left" (seconds, 0 when none) and
"outage_served" (storage requests answered by an outage).
GET /control/stats answers {"auth": n, "storage": {"DFW-public": n, ...}}.
"""
import datetime
import http.client
import http.server
import json
import os
import secrets
import sys
import threading
import urllib.parse

MAX_BODY = 64 << 20

state = {
    "lifetime": 3600.0,
    "tokens": {},  # token -> expiry (epoch seconds)
    "refuse_auth": False,
    "default_region": "ORD",
    "fail": {"storage": [], "auth": []},  # list of (status, retry_after)
    "auth_count": 0,
    "storage_count": {},
    "upstream": None,  # (token, storage_url), refreshed on a 401
    "listing": None,  # JSON text answered to container listings
    "outage_until": 0.0,  # epoch seconds; storage answers outage_status
    "outage_status": 503,
    "outage_served": 0,
}
lock = threading.Lock()


def upstream_login(force=False):
    with lock:
        if state["upstream"] and not force:
            return state["upstream"]
    u = urllib.parse.urlsplit(UP_AUTH)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.request("GET", u.path, headers={"X-Auth-User": UP_USER,
                                      "X-Auth-Key": UP_KEY})
    r = c.getresponse()
    r.read()
    if r.status // 100 != 2:
        raise RuntimeError("upstream auth answered %d" % r.status)
    up = (r.getheader("X-Auth-Token"), r.getheader("X-Storage-Url"))
    c.close()
    with lock:
        state["upstream"] = up
    return up


def take_failure(target):
    with lock:
        q = state["fail"][target]
        return q.pop(0) if q else None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("identity: " + (fmt % args) + "\n")

    def reply(self, status, body=b"", headers=None, ctype="application/json"):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if body is not None:
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n < 0 or n > MAX_BODY:
            raise ValueError("body too large")
        return self.rfile.read(n) if n else b""

    def fail_if_asked(self, target):
        f = take_failure(target)
        if not f:
            return False
        status, retry_after = f
        hdrs = {}
        if retry_after is not None:
            hdrs["Retry-After"] = str(retry_after)
        self.reply(status, b'{"error":"injected"}', hdrs)
        return True

    # ---- identity ----
    def tokens(self):
        data = self.body()
        with lock:
            state["auth_count"] += 1
        if self.fail_if_asked("auth"):
            return
        try:
            req = json.loads(data)
            auth = req["auth"]
        except (ValueError, KeyError, TypeError):
            return self.reply(400, b'{"badRequest":{"code":400}}')
        ok = False
        if "RAX-KSKEY:apiKeyCredentials" in auth:
            c = auth["RAX-KSKEY:apiKeyCredentials"]
            ok = c.get("username") == USER and c.get("apiKey") == APIKEY
        elif "passwordCredentials" in auth:
            c = auth["passwordCredentials"]
            ok = c.get("username") == USER and c.get("password") == PASSWORD
        with lock:
            refuse = state["refuse_auth"]
        if not ok or refuse:
            return self.reply(401, b'{"unauthorized":{"code":401,'
                              b'"message":"Unable to authenticate user"}}')
        if UP_AUTH != "-":
            upstream_login()
        tok = "emu-" + secrets.token_hex(16)
        with lock:
            life = state["lifetime"]
            exp = datetime.datetime.now(datetime.timezone.utc).timestamp() \
                + life
            state["tokens"][tok] = exp
            default_region = state["default_region"]
        base = "http://127.0.0.1:%d/swift/" % self.server.server_port
        eps = []
        for region in ("DFW", "ORD"):
            eps.append({"region": region, "tenantId": "MossoCloudFS_test",
                        "publicURL": base + region + "-public",
                        "internalURL": base + region + "-internal"})
        user = {"id": "1", "name": USER, "roles": []}
        if default_region:
            user["RAX-AUTH:defaultRegion"] = default_region
        expires = datetime.datetime.fromtimestamp(
            exp, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
        ans = {"access": {
            "token": {"id": tok, "expires": expires + "Z",
                      "tenant": {"id": "test", "name": "test"}},
            "user": user,
            "serviceCatalog": [
                {"name": "cloudFilesCDN", "type": "rax:object-cdn",
                 "endpoints": [{"region": "DFW",
                                "publicURL": "http://cdn.invalid/x"}]},
                {"name": "cloudFiles", "type": "object-store",
                 "endpoints": eps}]}}
        self.reply(200, json.dumps(ans).encode())

    # ---- control ----
    def control(self):
        if self.command == "GET":
            with lock:
                left = state["outage_until"] - datetime.datetime.now(
                    datetime.timezone.utc).timestamp()
                out = {"auth": state["auth_count"],
                       "storage": dict(state["storage_count"]),
                       "outage_left": max(0.0, left),
                       "outage_served": state["outage_served"]}
            return self.reply(200, json.dumps(out).encode())
        try:
            req = json.loads(self.body() or b"{}")
        except ValueError:
            return self.reply(400, b"{}")
        with lock:
            if "lifetime" in req:
                state["lifetime"] = float(req["lifetime"])
            if req.get("revoke"):
                state["tokens"].clear()
            if "refuse_auth" in req:
                state["refuse_auth"] = bool(req["refuse_auth"])
            if "default_region" in req:
                state["default_region"] = req["default_region"]
            if "listing" in req:
                state["listing"] = req["listing"]
            o = req.get("outage")
            if o:
                state["outage_until"] = datetime.datetime.now(
                    datetime.timezone.utc).timestamp() + \
                    float(o.get("seconds", 10))
                state["outage_status"] = int(o.get("status", 503))
            f = req.get("fail")
            if f:
                state["fail"][f.get("target", "storage")] += \
                    [(int(f["status"]), f.get("retry_after"))] * \
                    int(f.get("count", 1))
        self.reply(200, b"{}")

    # ---- storage, forwarded ----
    def storage(self, label, rest):
        data = self.body()
        with lock:
            state["storage_count"][label] = \
                state["storage_count"].get(label, 0) + 1
            exp = state["tokens"].get(self.headers.get("X-Auth-Token", ""))
        now = datetime.datetime.now(datetime.timezone.utc).timestamp()
        if exp is None or exp <= now:
            return self.reply(401, b"<html>Unauthorized</html>", None,
                              "text/html")
        if self.fail_if_asked("storage"):
            return
        with lock:
            out_status = state["outage_status"] \
                if now < state["outage_until"] else 0
            if out_status:
                state["outage_served"] += 1
        if out_status:
            return self.reply(out_status, b'{"error":"outage"}')
        with lock:
            listing = state["listing"]
        u = urllib.parse.urlsplit(rest)
        if UP_AUTH == "-":
            if self.command == "HEAD":
                return self.reply(204, None, {"Content-Length": "0"})
            if self.command == "GET" and u.path.count("/") == 1:
                return self.reply(200, (listing or "[]").encode())
            return self.reply(404, b"<html>Not Found</html>", None,
                              "text/html")
        if listing is not None and self.command == "GET" and \
                u.path.count("/") == 1 and "format=json" in u.query:
            return self.reply(200, listing.encode())
        for attempt in (0, 1):
            tok, url = upstream_login(force=attempt > 0)
            u = urllib.parse.urlsplit(url)
            hdrs = {k: v for k, v in self.headers.items()
                    if k.lower() not in ("host", "x-auth-token",
                                         "content-length", "connection")}
            hdrs["X-Auth-Token"] = tok
            if data or self.command in ("PUT", "POST"):
                hdrs["Content-Length"] = str(len(data))
            c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
            c.request(self.command, u.path + rest, body=data or None,
                      headers=hdrs)
            r = c.getresponse()
            payload = r.read()
            c.close()
            if r.status != 401:
                break
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("content-length", "connection",
                                 "transfer-encoding", "date", "server"):
                self.send_header(k, v)
        if self.command == "HEAD":
            self.send_header("Content-Length",
                             r.getheader("Content-Length") or "0")
            self.end_headers()
            return
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def route(self):
        path = self.path
        if path.startswith("/v2.0/tokens") and self.command == "POST":
            return self.tokens()
        if path.startswith("/control"):
            return self.control()
        if path.startswith("/swift/"):
            label, _, rest = path[len("/swift/"):].partition("/")
            return self.storage(label, "/" + rest if rest else "")
        self.reply(404, b"{}")

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_COPY = route


def main():
    global UP_AUTH, UP_USER, UP_KEY, USER, APIKEY, PASSWORD
    if len(sys.argv) != 8:
        sys.stderr.write(__doc__)
        sys.exit(2)
    portfile, UP_AUTH, UP_USER, UP_KEY, USER, APIKEY, PASSWORD = sys.argv[1:]
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_port)
    os.rename(tmp, portfile)
    srv.serve_forever()


if __name__ == "__main__":
    main()
