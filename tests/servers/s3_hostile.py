#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A scripted S3 server on loopback for tests/unit/test_s3.c: every answer
is deliberate (broken, hostile or plain), chosen by the bucket name of a
path-style request.

Usage: s3_hostile.py PORTFILE
Binds 127.0.0.1 on a free port, writes the port to PORTFILE (atomically)
and serves until killed or its parent dies (checked every 200 ms).

Buckets:
  garbage    every GET answers 200 "<<<not xml"
  trunc      a listing cut inside an element; a GET of an object promises
             1000 bytes, sends 10 and closes
  outside    a listing holding a key outside the prefix asked for
  loop       a truncated listing whose continuation token never changes
  dots       a bucket another client filled with keys of "." and ".."
             segments (../evil, d/./x, d/../y) and d/ok (5 bytes "dots\n");
             listings (ListObjectsV2 with a delimiter) show them as
             stored; GET and HEAD of d/ok work, other keys are 404
  kms        PUT answers 200 with x-amz-server-side-encryption: aws:kms and
             a 32-hex ETag that is no MD5 of the body (as SSE-KMS does)
  liar       PUT answers 200 with the ETag (MD5) of half the body sent
             and keeps that half; the Content-MD5 sent is kept in the
             file PORTFILE.md5
  ranges     objects of 100 bytes ((i * 7 + 3) & 0xFF), a Range answered
             with a 206 that is, by key: good (what was asked), other (its
             Content-Range and body start at 0), capped (honest, at most
             16 bytes), eofclose (honest headers, no Content-Length, half
             the body, then the connection closes)
             (and the other modes of range_faults.py)
  errors     404 NoSuchKey, 403 SignatureDoesNotMatch (key "denied"),
             a copy answered 200 with an <Error> body
  stale      GET ignores If-Match and answers ETag "other"
  folder     listings of "res/..." hold the folder object "res/" itself
             (0 bytes, as an S3 console's "Create folder" makes) and
             "res/a" (5 bytes)
  errpage    objects "small" (6 bytes) and "big" (200000) that HEAD and
             listings describe, whose GET answers 200 with a 62-byte
             <Error> document under the object's own ETag (a whole-object
             answer that is not the object)
  portal     as errpage, but the GET answers 200 with an HTML page and no
             ETag (a captive portal's or a proxy's error page)
  mpu        multipart: initiate works, every part answers 500; the
             number of open uploads is kept in the file PORTFILE.uploads
  okay       objects kept in memory: PUT, GET, HEAD, DELETE
  parts      objects kept in memory with their x-amz-meta-* headers, and
             multipart uploads (initiate, parts, complete, abort, a copy
             onto itself with REPLACE): every part PUT is counted in the
             file PORTFILE.parts, open uploads join PORTFILE.uploads. The
             parts of a key starting "fail" answer 500; of a key starting
             "flaky", the first PUT of part 1 of each upload answers 500.
             The first complete of a key starting "lost" (per server)
             answers 400 InvalidPart (as S3 does when a late send of a
             part replaced the one listed); the first of a key starting
             "expired" answers 404 NoSuchUpload and drops the upload (a
             lifecycle rule aborted it).
  delmany    objects kept in memory (PUT, GET, HEAD, DELETE) and
             DeleteObjects (POST ?delete): a body whose Content-MD5 or
             x-amz-content-sha256 does not match is 400 BadDigest, a body
             that is no Delete document or lists more than 1000 keys 400
             MalformedXML. Each POST and DELETE is a line of PORTFILE.dellog
             ("POST <query> keys=<n> quiet=<q> md5=<Content-MD5>", "DELETE
             <key, %-escaped>"), the last POST's body is PORTFILE.delbody.
             In a Delete list, a key starting "denied" answers an Error
             AccessDenied, "gone" NoSuchKey, "slow" SlowDown; "garbage"
             makes the answer "<<<not xml", "stranger" an Error naming a key
             not asked for, "fail" the answer 500 InternalError.
  nodel-501  as delmany, but POST ?delete answers 501 NotImplemented
  nodel-405  as delmany, but POST ?delete answers 405 with an HTML body
Every request's Authorization header must be there and name
AWS4-HMAC-SHA256, else 400. A body shorter than its Content-Length (the
client gave up inside it) answers 400 IncompleteBody and stores nothing.
"""
import base64
import hashlib
import os
import sys
import threading
import urllib.parse
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

import range_faults  # tests/servers, beside this script
from quiet_handler import QuietHandler, Server, serve  # likewise

lock = threading.Lock()
uploads = set()
count_file = None


def save_count():
    tmp = count_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(len(uploads)))
    os.rename(tmp, count_file)
store = {}
delstore = {}
attempts = {}
# bucket "parts": key -> (data, meta), upload id -> (key, meta, {n: data})
objects = {}
mpus = {}
part_puts = 0
flaky_seen = set()
lost_seen = set()


def save_parts():
    tmp = count_file[:-len(".uploads")] + ".parts.tmp"
    with open(tmp, "w") as f:
        f.write(str(part_puts))
    os.rename(tmp, tmp[:-4])


def etag_of(data):
    return hashlib.md5(data).hexdigest()


class H(QuietHandler):

    def xml(self, status, text):
        self.reply(status, text.encode(), [("Content-Type", "application/xml")])

    def error(self, status, code):
        self.xml(status, "<?xml version=\"1.0\"?><Error><Code>%s</Code>"
                 "<Message>scripted</Message></Error>" % code)

    def dots(self, m, key, q):
        keys = ["../evil", "d/./x", "d/../y", "d/ok"]
        if key == "d/ok" and m in ("GET", "HEAD"):
            return self.reply(200, b"dots\n", [("ETag", '"d"')])
        if key or "list-type" not in q:
            return self.error(404, "NoSuchKey")
        prefix = q.get("prefix", [""])[0]
        objs, prefixes = [], set()
        for k in keys:
            if not k.startswith(prefix):
                continue
            rest = k[len(prefix):]
            if "/" in rest:
                prefixes.add(prefix + rest.split("/", 1)[0] + "/")
            else:
                objs.append(k)
        body = "".join("<Contents><Key>%s</Key><Size>5</Size>"
                       "<LastModified>2024-01-01T00:00:00.000Z</LastModified>"
                       "<ETag>\"d\"</ETag></Contents>" % k for k in objs)
        body += "".join("<CommonPrefixes><Prefix>%s</Prefix></CommonPrefixes>"
                        % p for p in sorted(prefixes))
        return self.xml(200, "<ListBucketResult><IsTruncated>false"
                        "</IsTruncated>%s</ListBucketResult>" % body)

    def errpage(self, m, key, q, portal=False):
        sizes = {"small": 6, "big": 200000}
        page = (b'<?xml version="1.0"?><Error><Code>InternalError</Code>'
                b'</Error>')
        hdrs = [("ETag", '"e%s"' % key),
                ("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT")]
        if key in sizes and m == "HEAD":
            self.send_response(200)
            for k, v in hdrs:
                self.send_header(k, v)
            self.send_header("Content-Length", str(sizes[key]))
            self.end_headers()
            return None
        if key in sizes and m == "GET" and portal:
            return self.reply(200, b"<html><body>Gateway error, please "
                              b"retry</body></html>",
                              [("Content-Type", "text/html")])
        if key in sizes and m == "GET":
            return self.reply(200, page, hdrs + [("Content-Type",
                                                  "application/xml")])
        if key or "list-type" not in q:
            return self.error(404, "NoSuchKey")
        body = "".join("<Contents><Key>%s</Key><Size>%d</Size>"
                       "<LastModified>2024-01-01T00:00:00.000Z</LastModified>"
                       "<ETag>\"e%s\"</ETag></Contents>" % (k, n, k)
                       for k, n in sorted(sizes.items()))
        return self.xml(200, "<ListBucketResult><IsTruncated>false"
                        "</IsTruncated>%s</ListBucketResult>" % body)

    def range_answer(self, mode):
        data = bytes((i * 7 + 3) & 0xFF for i in range(100))
        range_faults.answer(self, mode, data, '"r"')

    def handle_any(self):
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        parts = u.path.split("/", 2)
        bucket = parts[1] if len(parts) > 1 else ""
        key = urllib.parse.unquote(parts[2]) if len(parts) > 2 else ""
        data = self.read_body()
        if len(data) != int(self.headers.get("Content-Length") or 0):
            # the client gave up inside the body: S3 stores nothing (a
            # torn part stored late would replace a newer send of it)
            return self.error(400, "IncompleteBody")
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("AWS4-HMAC-SHA256 Credential="):
            return self.error(400, "MissingSecurityHeader")
        m = self.command
        if bucket == "garbage":
            return self.reply(200, b"<<<not xml")
        if bucket == "trunc":
            if key:
                self.send_response(200)
                self.send_header("Content-Length", "1000")
                self.send_header("ETag", '"e"')
                self.end_headers()
                self.wfile.write(b"0123456789")
                self.wfile.flush()
                self.close_connection = True
                return
            return self.xml(200, "<ListBucketResult><Contents><Key>a")
        if bucket == "ranges":
            return self.range_answer(key)
        if bucket == "dots":
            return self.dots(m, key, q)
        if bucket == "folder" and "list-type" in q:
            prefix = q.get("prefix", [""])[0]
            body = "".join("<Contents><Key>%s</Key><Size>%d</Size>"
                           "<LastModified>2024-01-01T00:00:00.000Z"
                           "</LastModified><ETag>\"f\"</ETag></Contents>"
                           % (k, n) for k, n in (("res/", 0), ("res/a", 5))
                           if k.startswith(prefix))
            return self.xml(200, "<ListBucketResult><IsTruncated>false"
                            "</IsTruncated>%s</ListBucketResult>" % body)
        if bucket in ("errpage", "portal"):
            return self.errpage(m, key, q, bucket == "portal")
        if bucket == "kms" and m == "PUT":
            return self.reply(200, b"", [
                ("ETag", '"%s"' % hashlib.md5(b"kms" + data).hexdigest()),
                ("x-amz-server-side-encryption", "aws:kms")])
        if bucket == "liar" and m == "PUT":
            with open(count_file[:-len(".uploads")] + ".md5", "w") as f:
                f.write(self.headers.get("Content-MD5", ""))
            half = hashlib.md5(data[:len(data) // 2]).hexdigest()
            return self.reply(200, b"", [("ETag", '"%s"' % half)])
        if bucket == "outside":
            return self.xml(200, "<ListBucketResult><IsTruncated>false"
                            "</IsTruncated><Contents><Key>elsewhere/x</Key>"
                            "<Size>1</Size></Contents></ListBucketResult>")
        if bucket == "loop":
            return self.xml(200, "<ListBucketResult><IsTruncated>true"
                            "</IsTruncated><NextContinuationToken>same"
                            "</NextContinuationToken></ListBucketResult>")
        if bucket == "errors":
            if "x-amz-copy-source" in self.headers:
                return self.xml(200, "<Error><Code>InternalError</Code>"
                                "<Message>copy failed late</Message></Error>")
            if key == "denied":
                return self.error(403, "SignatureDoesNotMatch")
            if key == "src" and m == "HEAD":
                return self.reply(200, b"", [("ETag", '"s"'),
                                             ("Content-Length", "0")])
            return self.error(404, "NoSuchKey")
        if bucket == "stale":
            return self.reply(200, b"other-version", [("ETag", '"other"')])
        if bucket == "mpu":
            if m == "POST" and "uploads" in q:
                with lock:
                    uid = "u%d" % (len(uploads) + 1000)
                    uploads.add(uid)
                    save_count()
                return self.xml(200, "<InitiateMultipartUploadResult>"
                                "<Bucket>mpu</Bucket><Key>%s</Key>"
                                "<UploadId>%s</UploadId>"
                                "</InitiateMultipartUploadResult>" % (key, uid))
            if m == "DELETE" and "uploadId" in q:
                with lock:
                    uploads.discard(q["uploadId"][0])
                    save_count()
                return self.reply(204)
            if m == "PUT" and "partNumber" in q:
                return self.error(500, "InternalError")
            return self.error(404, "NoSuchKey")
        if bucket == "parts":
            return self.parts(m, key, q, data)
        if bucket in ("delmany", "nodel-501", "nodel-405"):
            return self.delmany(bucket, m, key, q, data)
        if bucket == "okay":
            if m == "PUT":
                with lock:
                    store[key] = data
                return self.reply(200, b"", [("ETag", '"v%d"' % len(data))])
            with lock:
                v = store.get(key)
            if m == "DELETE":
                with lock:
                    store.pop(key, None)
                return self.reply(204)
            if v is None:
                return self.error(404, "NoSuchKey")
            return self.reply(200, v, [("ETag", '"v%d"' % len(v))])
        return self.error(404, "NoSuchBucket")

    def log_del(self, line):
        with lock:
            with open(count_file[:-len(".uploads")] + ".dellog", "a",
                      encoding="utf-8", errors="surrogateescape") as f:
                f.write(line + "\n")

    def delmany(self, bucket, m, key, q, data):
        if m == "POST" and list(q) == ["delete"] and not key:
            return self.delete_objects(bucket, data)
        if m == "PUT":
            with lock:
                delstore[(bucket, key)] = data
            return self.reply(200, b"", [("ETag", '"%s"' % etag_of(data))])
        if m == "DELETE":
            self.log_del("DELETE " + urllib.parse.quote(key))
            with lock:
                delstore.pop((bucket, key), None)
            return self.reply(204)
        with lock:
            v = delstore.get((bucket, key))
        if v is None:
            return self.error(404, "NoSuchKey")
        return self.reply(200, v, [("ETag", '"%s"' % etag_of(v))])

    def delete_objects(self, bucket, data):
        ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
        md5 = self.headers.get("Content-MD5", "")
        keys = []
        quiet = "?"
        try:
            doc = ET.fromstring(data)
            if doc.tag != ns + "Delete":
                raise ValueError(doc.tag)
            quiet = doc.findtext(ns + "Quiet")
            for o in doc.findall(ns + "Object"):
                keys.append(o.find(ns + "Key").text)
        except (ET.ParseError, ValueError, AttributeError):
            keys = None
        self.log_del("POST %s keys=%s quiet=%s md5=%s" % (
            self.path.split("?", 1)[1], -1 if keys is None else len(keys),
            quiet, md5))
        tmp = count_file[:-len(".uploads")] + ".delbody.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.rename(tmp, tmp[:-4])
        if bucket == "nodel-501":
            return self.error(501, "NotImplemented")
        if bucket == "nodel-405":
            return self.reply(405, b"<html><body>405 Not Allowed</body>"
                              b"</html>", [("Content-Type", "text/html")])
        want = base64.b64encode(hashlib.md5(data).digest()).decode()
        sha = hashlib.sha256(data).hexdigest()
        if md5 != want or self.headers.get("x-amz-content-sha256") != sha:
            return self.error(400, "BadDigest")
        if keys is None or not keys or len(keys) > 1000:
            return self.error(400, "MalformedXML")
        if any(k.startswith("fail") for k in keys):
            return self.error(500, "InternalError")
        if any(k.startswith("garbage") for k in keys):
            return self.reply(200, b"<<<not xml")
        out = []
        for k in keys:
            code = ("AccessDenied" if k.startswith("denied") else
                    "NoSuchKey" if k.startswith("gone") else
                    "SlowDown" if k.startswith("slow") else None)
            if k.startswith("stranger"):
                k = "someone-else"
                code = "AccessDenied"
            if code:
                out.append("<Error><Key>%s</Key><Code>%s</Code><Message>"
                           "scripted</Message></Error>" % (escape(k), code))
                continue
            with lock:
                delstore.pop((bucket, k), None)
            if quiet != "true":
                out.append("<Deleted><Key>%s</Key></Deleted>" % escape(k))
        return self.xml(200, '<?xml version="1.0" encoding="UTF-8"?>\n'
                        '<DeleteResult xmlns="http://s3.amazonaws.com/doc/'
                        '2006-03-01/">%s</DeleteResult>' % "".join(out))

    def meta(self):
        return {k.lower(): v for k, v in self.headers.items()
                if k.lower().startswith("x-amz-meta-")}

    def send_object(self, m, data, meta):
        hdrs = [("ETag", '"%s"' % etag_of(data)),
                ("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT")]
        hdrs += list(meta.items())
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            a = int(a)
            b = min(int(b), len(data) - 1) if b else len(data) - 1
            if a >= len(data):
                return self.error(416, "InvalidRange")
            hdrs.append(("Content-Range",
                         "bytes %d-%d/%d" % (a, b, len(data))))
            self.send_response(206)
            body = data[a:b + 1]
        else:
            self.send_response(200)
            body = data
        for k, v in hdrs:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if m != "HEAD":
            self.wfile.write(body)

    def parts(self, m, key, q, data):
        global part_puts
        if m == "POST" and "uploads" in q:
            with lock:
                uid = "p%d" % (len(mpus) + 5000)
                mpus[uid] = (key, self.meta(), {})
                uploads.add(uid)
                save_count()
            return self.xml(200, "<InitiateMultipartUploadResult>"
                            "<Bucket>parts</Bucket><Key>%s</Key>"
                            "<UploadId>%s</UploadId>"
                            "</InitiateMultipartUploadResult>" % (key, uid))
        uid = q.get("uploadId", [None])[0]
        if uid is not None:
            with lock:
                up = mpus.get(uid) if uid in uploads else None
            if up is None:
                return self.error(404, "NoSuchUpload")
            if m == "PUT":
                with lock:
                    part_puts += 1
                    save_parts()
                    first = (uid, q["partNumber"][0]) not in flaky_seen
                    flaky_seen.add((uid, q["partNumber"][0]))
                    bad = key.startswith("fail") or (
                        key.startswith("flaky") and first and
                        q["partNumber"][0] == "1")
                if bad:
                    return self.error(500, "InternalError")
                with lock:
                    up[2][int(q["partNumber"][0])] = data
                return self.reply(200, b"", [("ETag",
                                              '"%s"' % etag_of(data))])
            if m == "DELETE":
                with lock:
                    uploads.discard(uid)
                    save_count()
                return self.reply(204)
            if m == "POST":
                doc = ET.fromstring(data)
                body = b""
                with lock:
                    first = key not in lost_seen
                    lost_seen.add(key)
                if first and key.startswith("lost"):
                    return self.error(400, "InvalidPart")
                if first and key.startswith("expired"):
                    with lock:
                        uploads.discard(uid)
                        save_count()
                    return self.error(404, "NoSuchUpload")
                for p in doc:
                    n = int(p.findtext("PartNumber"))
                    tag = p.findtext("ETag").strip('"')
                    got = up[2].get(n)
                    if got is None or etag_of(got) != tag:
                        return self.error(400, "InvalidPart")
                    body += got
                with lock:
                    objects[key] = (body, up[1])
                    uploads.discard(uid)
                    save_count()
                return self.xml(200, "<CompleteMultipartUploadResult>"
                                "<ETag>\"%s-%d\"</ETag>"
                                "</CompleteMultipartUploadResult>"
                                % (etag_of(body), len(doc)))
            return self.error(400, "InvalidRequest")
        src = self.headers.get("x-amz-copy-source")
        if m == "PUT" and src:
            skey = urllib.parse.unquote(src).split("/", 2)[2]
            with lock:
                o = objects.get(skey)
            if o is None:
                return self.error(404, "NoSuchKey")
            pin = self.headers.get("x-amz-copy-source-if-match")
            if pin and pin.strip('"') != etag_of(o[0]):
                return self.error(412, "PreconditionFailed")
            with lock:
                objects[key] = (o[0], self.meta())
            return self.xml(200, "<CopyObjectResult><ETag>\"%s\"</ETag>"
                            "</CopyObjectResult>" % etag_of(o[0]))
        if m == "PUT":
            with lock:
                objects[key] = (data, self.meta())
            return self.reply(200, b"", [("ETag", '"%s"' % etag_of(data))])
        if m == "DELETE":
            with lock:
                objects.pop(key, None)
            return self.reply(204)
        with lock:
            o = objects.get(key)
        if o is None:
            return self.error(404, "NoSuchKey")
        return self.send_object(m, o[0], o[1])

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


def main():
    global count_file
    count_file = sys.argv[1] + ".uploads"
    save_count()
    save_parts()
    serve(Server(("127.0.0.1", 0), H), sys.argv[1])


if __name__ == "__main__":
    main()
