#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""cdn_bench_probe.py - the durability probes of tests/bench/cdn_bench.sh.

Polls until a workload's result is on the server, with a bound, then exits
0; exits 1 with a message when the bound passes first.

Swift (its own API, tempauth v1.0; the credentials come from the
environment, CDN_PROBE_USER and CDN_PROBE_KEY, never from the command
line). A container of the S3 API is a container of the same account, so
the s3 system's bucket is probed the same way:
  cdn_bench_probe.py swift AUTH_URL CONTAINER mkcontainer
  cdn_bench_probe.py swift AUTH_URL CONTAINER head KEY SIZE TIMEOUT
      a HEAD on KEY shows Content-Length SIZE (the object is whole)
  cdn_bench_probe.py swift AUTH_URL CONTAINER count PREFIX N SIZE TIMEOUT
      at least N objects of SIZE bytes are listed under PREFIX
  cdn_bench_probe.py swift AUTH_URL CONTAINER gone PREFIX TIMEOUT
      no object is listed under PREFIX
  cdn_bench_probe.py swift AUTH_URL CONTAINER sync TIMEOUT
      nothing to wait for (a workload without a probe): only the log sync
Every Swift request carries `smux-bench-probe=1` in its query and its
User-Agent, so that the bench leaves them out of the request counts it
takes from the proxy's log. With CDN_PROBE_LOG set (the proxy's log
file), a probe ends with a HEAD on the account tagged with a unique id
and waits (bounded) until the proxy has logged it: Swift logs a request
after its response, so this lets the workload's last lines reach the log
before the bench counts them.

The Bunny emulator (tests/servers/bunny_emu.py) keeps a zone as a
directory tree, ROOT, whose files are what its GETs and listings serve
(a PUT is renamed into place under its tree lock): the probes look at the
tree itself and send the emulator no request, so its /_emu/stats deltas
are the workload's alone.
  cdn_bench_probe.py dir ROOT head KEY SIZE TIMEOUT
  cdn_bench_probe.py dir ROOT count PREFIX N SIZE TIMEOUT
  cdn_bench_probe.py dir ROOT gone PREFIX TIMEOUT
"""
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

MARK = "smux-bench-probe=1"
UA = "smux-bench-probe"
MAX_BODY = 16 << 20
MAX_PAGES = 100000


def die(msg):
    sys.stderr.write("cdn_bench_probe: %s\n" % msg)
    sys.exit(1)


def request(url, method="GET", headers=None, timeout=60):
    h = {"User-Agent": UA}
    h.update(headers or {})
    sep = "&" if "?" in url else "?"
    req = urllib.request.Request(url + sep + MARK, method=method, headers=h)
    return urllib.request.urlopen(req, timeout=timeout)


class Swift:
    def __init__(self, auth_url, container):
        user = os.environ.get("CDN_PROBE_USER")
        key = os.environ.get("CDN_PROBE_KEY")
        if not user or not key:
            die("CDN_PROBE_USER and CDN_PROBE_KEY must be set")
        with request(auth_url, headers={"X-Auth-User": user,
                                        "X-Auth-Key": key}) as r:
            self.token = r.headers.get("X-Auth-Token")
            self.url = r.headers.get("X-Storage-Url")
        if not self.token or not self.url or \
                not self.url.startswith(("http://", "https://")):
            die("auth at %s gave no token or storage URL" % auth_url)
        self.container = urllib.parse.quote(container, safe="")

    def call(self, method, path, timeout=60):
        return request(self.url + path, method,
                       {"X-Auth-Token": self.token}, timeout)

    def mkcontainer(self):
        with self.call("PUT", "/" + self.container) as r:
            if r.status not in (201, 202):
                die("PUT container: %d" % r.status)

    def head_size(self, key):
        try:
            with self.call("HEAD", "/%s/%s" % (self.container,
                                               urllib.parse.quote(key))) as r:
                v = r.headers.get("Content-Length")
                return int(v) if v is not None and v.isdigit() else -1
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return -1
            raise

    def list_sizes(self, prefix):
        """Sizes of every object under prefix (all pages)."""
        sizes = []
        marker = ""
        for _ in range(MAX_PAGES):
            q = {"format": "json", "prefix": prefix, "limit": "10000"}
            if marker:
                q["marker"] = marker
            with self.call("GET", "/%s?%s" % (self.container,
                                              urllib.parse.urlencode(q))) as r:
                body = r.read(MAX_BODY + 1)
            if len(body) > MAX_BODY:
                die("listing page over %d bytes" % MAX_BODY)
            page = json.loads(body) if body else []
            if not isinstance(page, list):
                die("listing is not a JSON array")
            if not page:
                return sizes
            for o in page:
                if not isinstance(o, dict) or not isinstance(o.get("name"), str):
                    die("listing entry without a name")
                b = o.get("bytes")
                sizes.append(b if isinstance(b, int) else -1)
            last = page[-1]["name"]
            if last <= marker:
                die("listing does not move past %r" % marker)
            marker = last
        die("listing of %s never ends" % prefix)

    def log_sync(self, log, timeout):
        """A tagged HEAD on the account, then wait for its log line."""
        tag = uuid.uuid4().hex
        with self.call("HEAD", "?smux-bench-sync=" + tag):
            pass
        end = time.monotonic() + timeout
        while True:
            with open(log, "rb") as f:
                if tag.encode() in f.read():
                    return
            if time.monotonic() > end:
                die("the proxy did not log %s in %d s" % (tag, timeout))
            time.sleep(0.05)


class Tree:
    """The emulator's zone directory."""

    def __init__(self, root):
        self.root = os.path.realpath(root)

    def path(self, key):
        p = os.path.realpath(os.path.join(self.root, key))
        if p != self.root and not p.startswith(self.root + os.sep):
            die("%s is outside %s" % (key, self.root))
        return p

    def head_size(self, key):
        try:
            return os.stat(self.path(key)).st_size
        except FileNotFoundError:
            return -1

    def list_sizes(self, prefix):
        """Sizes of the files under the directory PREFIX names."""
        top = self.path(prefix.rstrip("/"))
        if os.path.isfile(top):
            return [os.stat(top).st_size]
        sizes = []
        for d, _, files in os.walk(top):
            for f in files:
                try:
                    sizes.append(os.stat(os.path.join(d, f)).st_size)
                except FileNotFoundError:
                    pass
        if not sizes and os.path.isdir(top):
            sizes.append(0)  # an empty directory is still there
        return sizes


def settled(cond):
    """cond(), with a 5xx answer counting as "not yet"."""
    try:
        return cond()
    except urllib.error.HTTPError as e:
        if e.code >= 500:
            return False
        raise


def poll(cond, timeout, what):
    end = time.monotonic() + timeout
    delay = 0.005
    while True:
        if settled(cond):
            return
        if time.monotonic() > end:
            die("%s: not reached in %d s" % (what, timeout))
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def main(a):
    if len(a) < 5 or a[1] not in ("swift", "dir"):
        die("usage: swift AUTH_URL CONTAINER CMD ... | dir ROOT CMD ...")
    try:
        if a[1] == "swift":
            srv = Swift(a[2], a[3])
            cmd, rest = a[4], a[5:]
        else:
            srv = Tree(a[2])
            cmd, rest = a[3], a[4:]
        tmo = 0
        if cmd == "mkcontainer" and a[1] == "swift" and not rest:
            srv.mkcontainer()
            return
        if cmd == "head" and len(rest) == 3:
            key, size, tmo = rest[0], int(rest[1]), int(rest[2])
            poll(lambda: srv.head_size(key) == size, tmo,
                 "HEAD %s = %d bytes" % (key, size))
        elif cmd == "count" and len(rest) == 4:
            prefix, n, size, tmo = rest[0], int(rest[1]), int(rest[2]), \
                int(rest[3])
            poll(lambda: sum(1 for s in srv.list_sizes(prefix)
                             if s == size) >= n, tmo,
                 "%d objects of %d bytes under %s" % (n, size, prefix))
        elif cmd == "gone" and len(rest) == 2:
            prefix, tmo = rest[0], int(rest[1])
            poll(lambda: not srv.list_sizes(prefix), tmo,
                 "no object under %s" % prefix)
        elif cmd == "sync" and a[1] == "swift" and len(rest) == 1:
            tmo = int(rest[0])
        else:
            die("bad arguments: %s" % " ".join(a[1:]))
        log = os.environ.get("CDN_PROBE_LOG")
        if a[1] == "swift" and log:
            srv.log_sync(log, tmo)
    except (ValueError, urllib.error.URLError, OSError) as e:
        die("%s: %s" % (" ".join(a[1:2] + a[4:5]), e))


if __name__ == "__main__":
    main(sys.argv)
