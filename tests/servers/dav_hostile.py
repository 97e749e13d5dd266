#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A scripted WebDAV server on loopback for tests/integration/
test_dav_hostile.sh: an in-memory tree (PUT, GET with Range, HEAD,
PROPFIND Depth 0 and 1 with getetag, MKCOL, DELETE, MOVE, COPY) that
misbehaves under some top-level collections, as servers seen in the wild
do:
  cut/     a PUT is answered 201 and half its body is kept
  lost/    a PUT is answered 201 and nothing is kept
  locked/  a DELETE or MOVE of a file is answered 207 Multi-Status whose
           response says 423 Locked, and nothing changes
  noetag/  a GET carries neither ETag nor Last-Modified (lighttpd's
           mod_webdav), while PROPFIND gives getetag
  plain/   PROPFIND gives no getetag (as nginx's dav-ext) and a GET
           neither ETag nor Last-Modified (as lighttpd's mod_webdav)
  portal/  PROPFIND gives no getetag (as nginx's dav-ext); a GET of a
           file answers 200 with an HTML page and no validators (a
           captive portal's or a proxy's error page), HEAD as it should
Usage: dav_hostile.py PORTFILE
Binds 127.0.0.1 on a free port, writes the port to PORTFILE (atomically)
and serves until killed or its parent dies (checked every 200 ms).
"""
import email.utils
import hashlib
import sys
import threading
import time
import urllib.parse

from quiet_handler import QuietHandler, Server, serve  # tests/servers

lock = threading.Lock()
tree = {"": None}  # path without slashes at either end -> bytes, or None
mtimes = {}

MS = ('<?xml version="1.0" encoding="utf-8"?>'
      '<D:multistatus xmlns:D="DAV:">%s</D:multistatus>')


def etag(data):
    return hashlib.md5(data).hexdigest()


def parent(p):
    return p.rsplit("/", 1)[0] if "/" in p else ""


class H(QuietHandler):

    def path_of(self, url):
        p = urllib.parse.unquote(urllib.parse.urlsplit(url).path)
        return p.strip("/")

    def entry(self, p, v):
        href = urllib.parse.quote("/" + p + ("/" if v is None and p else ""))
        t = email.utils.formatdate(mtimes.get(p, 0), usegmt=True)
        tag = p.split("/", 1)[0] not in ("portal", "plain")
        if v is None:
            props = ("<D:resourcetype><D:collection/></D:resourcetype>"
                     + ("<D:getetag>\"c\"</D:getetag>" if tag else ""))
        else:
            props = ("<D:resourcetype/><D:getcontentlength>%d"
                     "</D:getcontentlength>" % len(v)
                     + ("<D:getetag>\"%s\"</D:getetag>" % etag(v)
                        if tag else ""))
        return ("<D:response><D:href>%s</D:href><D:propstat><D:prop>%s"
                "<D:getlastmodified>%s</D:getlastmodified></D:prop>"
                "<D:status>HTTP/1.1 200 OK</D:status></D:propstat>"
                "</D:response>" % (href, props, t))

    def do_PROPFIND(self):
        self.read_body()
        p = self.path_of(self.path)
        with lock:
            if p not in tree:
                return self.reply(404)
            out = [self.entry(p, tree[p])]
            if tree[p] is None and self.headers.get("Depth") != "0":
                out += [self.entry(k, v) for k, v in sorted(tree.items())
                        if k and parent(k) == p]
        self.reply(207, (MS % "".join(out)).encode(),
                   [("Content-Type", "application/xml")])

    def do_MKCOL(self):
        self.read_body()
        p = self.path_of(self.path)
        with lock:
            if p in tree:
                return self.reply(405)
            if parent(p) not in tree:
                return self.reply(409)
            tree[p] = None
            mtimes[p] = time.time()
        self.reply(201)

    def do_PUT(self):
        data = self.read_body()
        p = self.path_of(self.path)
        top = p.split("/", 1)[0]
        with lock:
            if parent(p) not in tree:
                return self.reply(409)
            if top == "cut":
                data = data[:len(data) // 2]
            if top != "lost":
                tree[p] = data
                mtimes[p] = time.time()
        self.reply(201)

    def do_GET(self):
        p = self.path_of(self.path)
        with lock:
            v = tree.get(p)
        if v is None:
            return self.reply(404)
        top = p.split("/", 1)[0]
        if top == "portal" and self.command == "GET":
            return self.reply(200, b"<html><body>Gateway error, please "
                              b"retry</body></html>",
                              [("Content-Type", "text/html")])
        hdrs = []
        if top == "portal":
            hdrs = [("Last-Modified",
                     email.utils.formatdate(mtimes[p], usegmt=True))]
        elif top not in ("noetag", "plain"):
            hdrs = [("ETag", '"%s"' % etag(v)),
                    ("Last-Modified",
                     email.utils.formatdate(mtimes[p], usegmt=True))]
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes=") and v:
            a, _, b = rng[6:].partition("-")
            first = int(a)
            last = min(int(b), len(v) - 1) if b else len(v) - 1
            if first >= len(v):
                return self.reply(416, b"",
                                  [("Content-Range", "bytes */%d" % len(v))])
            return self.reply(206, v[first:last + 1], hdrs + [
                ("Content-Range", "bytes %d-%d/%d" % (first, last, len(v)))])
        self.reply(200, v, hdrs)

    do_HEAD = do_GET

    def locked(self, p):
        doc = MS % ("<D:response><D:href>%s</D:href><D:status>HTTP/1.1 423 "
                    "Locked</D:status></D:response>" % urllib.parse.quote(
                        "/" + p))
        self.reply(207, doc.encode(), [("Content-Type", "application/xml")])

    def do_DELETE(self):
        self.read_body()
        p = self.path_of(self.path)
        with lock:
            if p not in tree:
                return self.reply(404)
            if p.split("/", 1)[0] == "locked" and tree[p] is not None:
                return self.locked(p)
            for k in [k for k in tree if k == p or k.startswith(p + "/")]:
                del tree[k]
        self.reply(204)

    def transfer(self, move):
        self.read_body()
        src = self.path_of(self.path)
        dst = self.path_of(self.headers.get("Destination", ""))
        with lock:
            if src not in tree:
                return self.reply(404)
            if parent(dst) not in tree:
                return self.reply(409)
            if move and src.split("/", 1)[0] == "locked" and \
                    tree[src] is not None:
                return self.locked(src)
            existed = dst in tree
            moved = {dst + k[len(src):]: v for k, v in tree.items()
                     if k == src or k.startswith(src + "/")}
            if move:
                for k in [k for k in tree
                          if k == src or k.startswith(src + "/")]:
                    del tree[k]
            tree.update(moved)
            for k in moved:
                mtimes[k] = time.time()
        self.reply(204 if existed else 201)

    def do_MOVE(self):
        self.transfer(True)

    def do_COPY(self):
        self.transfer(False)


def main():
    serve(Server(("127.0.0.1", 0), H), sys.argv[1])


if __name__ == "__main__":
    main()
