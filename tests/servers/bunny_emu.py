#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A Bunny Storage (Edge Storage HTTP API) emulator on loopback, for the
bunny backend's conformance fixture, unit tests and benches.

Usage: bunny_emu.py PORTFILE ROOTDIR [ZONE [ACCESSKEY]]
  ZONE defaults to "zone", ACCESSKEY to "emu-secret" (or $BUNNY_EMU_KEY).
Binds 127.0.0.1 on a free port, writes the port to PORTFILE (atomically),
keeps the zone's files under ROOTDIR/<zone>/ and serves until killed or
until its parent process dies (checked every 200 ms; not with
BUNNY_EMU_DETACHED=1, which tests/servers/bunny.sh sets).

Behaviour follows the published API (docs.bunny.net/storage/http, the
Edge Storage API reference and the official SDKs), not smuxfs's client:
  - every request needs "AccessKey: <zone password>" and a path under
    /<zone>/; anything else is 401 (a wrong region host looks like this
    on the real service)
  - PUT /zone/path/file: raw body, 201. An optional "Checksum" header is
    the UPPERCASE hex SHA-256 of the body: a mismatch (or a lowercase
    value) is 400. Parent directories are made as needed. A directory in
    the way, or a file where a parent directory would be, is 400.
  - PUT /zone/dir/ with an empty body makes the directory (201; 400 when
    it exists)
  - GET /zone/path/file: 200 with the content; Range honoured (206, or 416
    past the end) unless the "range" knob is off, then 200 with it all
  - GET /zone/dir/ (trailing slash): 200, a JSON array of the directory's
    entries (Guid, StorageZoneName, Path, ObjectName, Length, LastChanged,
    ServerId, ArrayNumber, IsDirectory, UserId, ContentType, DateCreated,
    StorageZoneId, Checksum, ReplicatedZones); an absent directory lists
    as []. Timestamps are UTC without a zone ("2024-01-15T10:30:00.123")
  - DESCRIBE /zone/path: 200, one such JSON object; 404 when absent
  - DELETE /zone/path/file: 200, 404 when absent; a directory (dir/, or a
    directory named without its slash) is deleted recursively
More zones (each with its own password) for one server shared by tests:
  POST /_emu/zone?name=Z&key=K             makes zone Z (200; 409 when it
                                            exists), its files in ROOTDIR/Z/
Fault knobs (no AccessKey needed; loopback tests only):
  POST /_emu/set?name=value[&name=value]   sets knobs, answers 200
  GET  /_emu/stats                          JSON counters
  knobs: range=0|1        honour Range (default 1)
         range_cap=N      a 206 carries at most N bytes (0: no cap), as
                          RFC 9110 lets a server answer less than asked
         burst429=N       the next N zone requests answer 429
         retry_after=S    Retry-After seconds on those 429s (-1: none)
         burst5xx=N       the next N zone requests answer 503
         bad_checksum=N   the next N PUTs that carry a Checksum are
                          answered 400 as if the body arrived corrupted
         delay_ms=M       each zone request is held M ms (to make
                          concurrent requests overlap)
         describe_dirs=0|1  DESCRIBE answers for directories (default 1;
                          the SDKs use it for files only: 0 answers 404)
         checksums=0|1    DESCRIBE and listings give each file's Checksum
                          (default 1; the field is nullable: 0 gives null)
  stats: requests, by_method, served429, served5xx, checksum400,
         inflight_max (most zone requests in progress at once), puts_with_checksum,
         object_gets (GETs of a file, listings not counted)
"""
import datetime
import hashlib
import http.server
import json
import os
import shutil
import socket
import socketserver
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

lock = threading.Lock()
knobs = {"range": 1, "range_cap": 0, "describe_dirs": 1, "checksums": 1, "burst429": 0, "retry_after": -1, "burst5xx": 0,
         "bad_checksum": 0, "delay_ms": 0}
stats = {"requests": 0, "by_method": {}, "served429": 0, "served5xx": 0,
         "checksum400": 0, "inflight_max": 0, "puts_with_checksum": 0,
         "object_gets": 0}
inflight = [0]
# one lock for the tree: a PUT's rename and a DELETE's rmtree are each
# atomic for readers that also take it
tree_lock = threading.Lock()

# zone name -> password; ROOTDIR/<zone>/ holds each zone's files
zones = {}
BASE = "."
TMP = "."


def stamp(ns):
    t = datetime.datetime.fromtimestamp(ns / 1e9, datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03d" % (t.microsecond // 1000)


# path -> (mtime_ns, size, checksum): what PUT computed, so DESCRIBE and
# listings do not read every file again
sums = {}


def sha256_file(path):
    st = os.stat(path)
    with lock:
        c = sums.get(path)
    if c and c[0] == st.st_mtime_ns and c[1] == st.st_size:
        return c[2]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    c = h.hexdigest().upper()
    with lock:  # kept, as a PUT's: a 512 MiB file is not read per DESCRIBE
        sums[path] = (st.st_mtime_ns, st.st_size, c)
    return c


def describe(zone, fs_path, rel):
    """The JSON object of one entry; rel is its path inside the zone."""
    st = os.stat(fs_path)
    isdir = os.path.isdir(fs_path)
    rel = rel.strip("/")
    parent, _, name = rel.rpartition("/")
    path = "/" + zone + "/" + (parent + "/" if parent else "")
    return {
        "Guid": str(uuid.uuid5(uuid.NAMESPACE_URL, rel)),
        "StorageZoneName": zone,
        "Path": path,
        "ObjectName": name,
        "Length": 0 if isdir else st.st_size,
        "LastChanged": stamp(st.st_mtime_ns),
        "ServerId": 1,
        "ArrayNumber": 0,
        "IsDirectory": isdir,
        "UserId": "00000000-0000-0000-0000-000000000000",
        "ContentType": "",
        "DateCreated": stamp(st.st_mtime_ns),
        "StorageZoneId": 1,
        "Checksum": None if isdir or not knobs["checksums"]
        else sha256_file(fs_path),
        "ReplicatedZones": None,
    }


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def setup(self):
        super().setup()
        # headers and body go out in separate writes: without this, Nagle
        # and the client's delayed ACK hold every answer ~40 ms
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def reply(self, status, body=b"", ctype="application/json", hdrs=None):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (hdrs or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def err(self, status, msg):
        self.reply(status, json.dumps({"HttpCode": status, "Message": msg}))

    def read_body(self):
        n = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                line = self.rfile.readline(100)
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline(100)
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline(10)
        return self.rfile.read(int(n)) if n else b""

    # ---- control endpoint ----
    def control(self, url):
        if url.path == "/_emu/stats":
            with lock:
                self.reply(200, json.dumps(stats))
            return
        if url.path == "/_emu/zone":
            self.read_body()
            q = urllib.parse.parse_qs(url.query)
            name, key = q.get("name", [""])[0], q.get("key", [""])[0]
            if not name.replace("-", "").isalnum() or not key:
                self.err(400, "bad zone name or key")
                return
            with lock:
                if name in zones:
                    self.err(409, "zone exists")
                    return
                os.makedirs(os.path.join(BASE, name), exist_ok=True)
                zones[name] = key
            self.reply(200, "{}")
            return
        if url.path == "/_emu/set":
            self.read_body()
            q = urllib.parse.parse_qs(url.query)
            with lock:
                for k, v in q.items():
                    if k not in knobs:
                        self.err(400, "unknown knob " + k)
                        return
                    knobs[k] = int(v[0])
            self.reply(200, "{}")
            return
        self.err(404, "no such control")

    def dispatch(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path.startswith("/_emu/"):
            self.control(url)
            return
        body = None
        if self.command == "PUT":
            body = self.read_body()  # read before any answer
        with lock:
            stats["requests"] += 1
            bm = stats["by_method"]
            bm[self.command] = bm.get(self.command, 0) + 1
            if self.command == "GET" and not url.path.endswith("/"):
                stats["object_gets"] += 1  # not listings
        path = urllib.parse.unquote(url.path)
        zone = path.split("/")[1] if path.count("/") >= 2 else ""
        with lock:
            key = zones.get(zone)
        # a wrong password and a zone this host does not have (another
        # region's) look alike: 401
        if key is None or self.headers.get("AccessKey") != key or \
                "\0" in path:
            self.err(401, "Unauthorized")
            return
        self.zone = zone
        self.root = os.path.join(BASE, zone)
        rel = path[len(zone) + 2:]
        parts = [p for p in rel.split("/") if p]
        if any(p in (".", "..") for p in parts):
            self.err(400, "Invalid path")
            return
        with lock:
            inflight[0] += 1
            stats["inflight_max"] = max(stats["inflight_max"], inflight[0])
            delay = knobs["delay_ms"]
            fault = None
            if knobs["burst429"] > 0:
                knobs["burst429"] -= 1
                stats["served429"] += 1
                fault = 429
            elif knobs["burst5xx"] > 0:
                knobs["burst5xx"] -= 1
                stats["served5xx"] += 1
                fault = 503
        try:
            if delay:
                time.sleep(delay / 1000.0)  # the server's pace, a knob
            if fault == 429:
                h = {}
                if knobs["retry_after"] >= 0:
                    h["Retry-After"] = str(knobs["retry_after"])
                self.reply(429, json.dumps({"HttpCode": 429,
                                            "Message": "Too many requests"}),
                           hdrs=h)
                return
            if fault == 503:
                self.err(503, "Service unavailable")
                return
            fs = os.path.join(self.root, *parts) if parts else self.root
            is_dir_path = rel == "" or rel.endswith("/")
            m = self.command
            if m == "GET":
                self.do_get_(fs, rel, parts, is_dir_path)
            elif m == "DESCRIBE":
                self.do_describe_(fs, rel, parts)
            elif m == "PUT":
                self.do_put_(fs, parts, is_dir_path, body)
            elif m == "DELETE":
                self.do_delete_(fs, parts)
            else:
                self.err(405, "Method not allowed")
        finally:
            with lock:
                inflight[0] -= 1

    def do_get_(self, fs, rel, parts, is_dir_path):
        if is_dir_path:
            with tree_lock:
                if not os.path.isdir(fs):
                    out = []  # an absent directory lists empty
                else:
                    out = []
                    for name in sorted(os.listdir(fs)):
                        sub = "/".join(parts + [name])
                        try:
                            out.append(describe(self.zone, os.path.join(fs, name),
                                                sub))
                        except FileNotFoundError:
                            pass
            self.reply(200, json.dumps(out))
            return
        # the file is opened under the lock (a PUT replaces it by a rename,
        # so the open file is one version) and only the range asked for is
        # read from it, outside the lock and in pieces: reading the whole
        # object for each ranged GET, under the lock, made a 512 MiB cold
        # read take a minute here (37 ranged GETs, one at a time)
        with tree_lock:
            if not os.path.isfile(fs):
                self.err(404, "Object Not Found")
                return
            f = open(fs, "rb")
        with f:
            st = os.fstat(f.fileno())
            self.send_range(f, st.st_size, st.st_mtime)

    def send_range(self, f, size, mtime):
        """200 with all of @f, or 206/416 for the Range header."""
        rng = self.headers.get("Range")
        hdrs = {"Last-Modified": self.date_time_string(mtime),
                "Accept-Ranges": "bytes" if knobs["range"] else "none"}
        start, end, status = 0, size - 1, 200
        if rng and knobs["range"] and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            try:
                start = int(a)
                end = min(int(b) if b else size - 1, size - 1)
                status = 206
            except ValueError:
                start, end = 0, size - 1
            if status == 206 and start >= size:
                hdrs["Content-Range"] = "bytes */%d" % size
                self.reply(416, b"", "application/octet-stream", hdrs)
                return
            if status == 206 and knobs["range_cap"] > 0:
                end = min(end, start + knobs["range_cap"] - 1)
            if status == 206:
                hdrs["Content-Range"] = "bytes %d-%d/%d" % (start, end, size)
        length = max(end - start + 1, 0)
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        for k, v in hdrs.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        f.seek(start)
        while length > 0:
            chunk = f.read(min(length, 1 << 20))
            if not chunk:
                break
            self.wfile.write(chunk)
            length -= len(chunk)

    def do_describe_(self, fs, rel, parts):
        with tree_lock:
            if not knobs["describe_dirs"] and (not parts or
                                               os.path.isdir(fs)):
                self.err(404, "Object Not Found")
                return
            if not parts:
                self.reply(200, json.dumps(describe(self.zone, self.root,
                                                    "")))
                return
            if not os.path.exists(fs):
                self.err(404, "Object Not Found")
                return
            self.reply(200, json.dumps(describe(self.zone, fs,
                                                "/".join(parts))))

    def parents_ok(self, parts):
        cur = self.root
        for p in parts[:-1]:
            cur = os.path.join(cur, p)
            if os.path.exists(cur) and not os.path.isdir(cur):
                return False
        return True

    def do_put_(self, fs, parts, is_dir_path, body):
        if not parts:
            self.err(400, "Invalid path")
            return
        if is_dir_path:
            with tree_lock:
                if not self.parents_ok(parts + ["x"]):
                    self.err(400, "A file is in the way")
                    return
                if os.path.exists(fs):
                    self.err(400, "Directory already exists")
                    return
                os.makedirs(fs)
            self.reply(201, json.dumps({"HttpCode": 201,
                                        "Message": "Directory created."}))
            return
        want = self.headers.get("Checksum")
        if want is not None:
            with lock:
                stats["puts_with_checksum"] += 1
                forced = knobs["bad_checksum"] > 0
                if forced:
                    knobs["bad_checksum"] -= 1
            got = hashlib.sha256(body).hexdigest().upper()
            if forced or want != got:
                with lock:
                    stats["checksum400"] += 1
                self.err(400, "Checksum and file hash do not match.")
                return
        fd, tmp = tempfile.mkstemp(dir=TMP)
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        with tree_lock:
            if not self.parents_ok(parts) or os.path.isdir(fs):
                os.unlink(tmp)
                self.err(400, "A directory or file is in the way")
                return
            os.makedirs(os.path.dirname(fs), exist_ok=True)
            os.replace(tmp, fs)
            st = os.stat(fs)
            with lock:
                sums[fs] = (st.st_mtime_ns, st.st_size,
                            hashlib.sha256(body).hexdigest().upper())
        self.reply(201, json.dumps({"HttpCode": 201,
                                    "Message": "File uploaded."}))

    def do_delete_(self, fs, parts):
        with tree_lock:
            if not parts:
                self.err(400, "Cannot delete the zone root")
                return
            if os.path.isdir(fs):
                shutil.rmtree(fs)  # recursive, slash or not
            elif os.path.exists(fs):
                os.unlink(fs)
            else:
                self.err(404, "Object Not Found")
                return
        self.reply(200, json.dumps({"HttpCode": 200,
                                    "Message": "File deleted successfuly."}))

    do_GET = dispatch
    do_PUT = dispatch
    do_DELETE = dispatch
    do_DESCRIBE = dispatch
    do_POST = dispatch
    do_HEAD = dispatch


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def handle_error(self, request, client_address):
        # a client that hangs up (a cancelled get) is not news
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def watch_parent(ppid):
    while True:
        if os.getppid() != ppid:
            os._exit(0)
        time.sleep(0.2)


def main():
    global BASE, TMP
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    portfile, root = sys.argv[1], sys.argv[2]
    zone = sys.argv[3] if len(sys.argv) > 3 else "zone"
    key = sys.argv[4] if len(sys.argv) > 4 else \
        os.environ.get("BUNNY_EMU_KEY", "emu-secret")
    BASE = os.path.abspath(root)
    TMP = os.path.join(BASE, ".tmp")  # not a zone name: has a dot
    zones[zone] = key
    os.makedirs(os.path.join(BASE, zone), exist_ok=True)
    os.makedirs(TMP, exist_ok=True)
    srv = Server(("127.0.0.1", 0), Handler)
    # a start script (bunny.sh) leaves it running: BUNNY_EMU_DETACHED=1
    if os.environ.get("BUNNY_EMU_DETACHED") != "1":
        threading.Thread(target=watch_parent, args=(os.getppid(),),
                         daemon=True).start()
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.replace(tmp, portfile)
    srv.serve_forever()


if __name__ == "__main__":
    main()
