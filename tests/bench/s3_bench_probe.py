#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""s3_bench_probe.py - the durability probes of tests/bench/s3_bench.sh.

Polls s3rver (unsigned requests: s3rver does not check signatures) until a
workload's result is on the server, with a bound, then exits 0; exits 1 with
a message when the bound passes first.

  s3_bench_probe.py ENDPOINT BUCKET head KEY SIZE TIMEOUT
      a HEAD on KEY shows Content-Length SIZE (the object is whole)
  s3_bench_probe.py ENDPOINT BUCKET count PREFIX N SIZE TIMEOUT
      at least N objects of SIZE bytes are listed under PREFIX
  s3_bench_probe.py ENDPOINT BUCKET gone PREFIX TIMEOUT
      no object is listed under PREFIX

Every request carries the query parameter `smux-bench-probe=1` so that the
bench can leave the probes out of the request counts it takes from
s3rver's log. Listings page with ListObjectsV2 continuation tokens; the
responses are parsed with xml.etree (bounded to 16 MiB a page).
"""
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

MARK = "smux-bench-probe=1"
MAX_BODY = 16 << 20


def die(msg):
    sys.stderr.write("s3_bench_probe: %s\n" % msg)
    sys.exit(1)


def head_size(ep, bucket, key):
    url = "%s/%s/%s?%s" % (ep, bucket, urllib.parse.quote(key), MARK)
    req = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            v = r.headers.get("Content-Length")
            return int(v) if v is not None and v.isdigit() else -1
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return -1
        raise


def list_sizes(ep, bucket, prefix):
    """Sizes of every object under prefix (all pages)."""
    sizes = []
    token = None
    for _ in range(100000):
        q = {"list-type": "2", "prefix": prefix, "max-keys": "1000"}
        if token:
            q["continuation-token"] = token
        url = "%s/%s?%s&%s" % (ep, bucket, urllib.parse.urlencode(q), MARK)
        with urllib.request.urlopen(url, timeout=60) as r:
            body = r.read(MAX_BODY + 1)
        if len(body) > MAX_BODY:
            die("listing page over %d bytes" % MAX_BODY)
        root = ET.fromstring(body)
        # s3rver's namespace is not AWS's: match local names only
        for e in root.iter():
            e.tag = e.tag.rsplit("}", 1)[-1]
        for c in root.iter("Contents"):
            s = c.findtext("Size")
            sizes.append(int(s) if s and s.isdigit() else -1)
        if root.findtext("IsTruncated") != "true":
            return sizes
        token = root.findtext("NextContinuationToken")
        if not token:
            die("truncated listing without a continuation token")
    die("listing of %s never ends" % prefix)


def settled(cond):
    """cond(), with a 5xx answer counting as "not yet": s3rver 3.7.1 was
    seen answering a listing with 500 while the objects under it were
    being written."""
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
    if len(a) < 4:
        die("usage: ENDPOINT BUCKET head|count|gone ...")
    ep, bucket, cmd = a[1], a[2], a[3]
    try:
        if cmd == "head" and len(a) == 7:
            key, size, tmo = a[4], int(a[5]), int(a[6])
            poll(lambda: head_size(ep, bucket, key) == size, tmo,
                 "HEAD %s = %d bytes" % (key, size))
        elif cmd == "count" and len(a) == 8:
            prefix, n, size, tmo = a[4], int(a[5]), int(a[6]), int(a[7])
            poll(lambda: sum(1 for s in list_sizes(ep, bucket, prefix)
                             if s == size) >= n, tmo,
                 "%d objects of %d bytes under %s" % (n, size, prefix))
        elif cmd == "gone" and len(a) == 6:
            prefix, tmo = a[4], int(a[5])
            poll(lambda: not list_sizes(ep, bucket, prefix), tmo,
                 "no object under %s" % prefix)
        else:
            die("bad arguments: %s" % " ".join(a[3:]))
    except (ValueError, ET.ParseError, urllib.error.URLError, OSError) as e:
        die("%s: %s" % (cmd, e))


if __name__ == "__main__":
    main(sys.argv)
