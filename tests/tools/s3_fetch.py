#!/usr/bin/python3
"""s3_fetch.py ENDPOINT BUCKET DIR: downloads every object of BUCKET on the
S3 server at ENDPOINT (path-style) into DIR, the key as the relative path;
keys ending in "/" (directory markers) are left out. Reads the credentials
from S3_ACCESS_KEY and S3_SECRET_KEY in the environment and signs with
botocore's SigV4 signer (Debian python3-botocore). One process for the whole
bucket: the aws CLI takes seconds per call on this machine.

Every answer is checked: a non-200, a truncated listing without a
continuation token, a key with an empty, absolute or ".." component (which
would write outside DIR), more than 100000 keys, or a listing that is not
S3 XML fails with exit 1 and a message naming the bucket and the key."""
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

MAX_KEYS = 100000


def get(endpoint, creds, path, query=""):
    url = endpoint + urllib.parse.quote(path) + (("?" + query) if query else "")
    req = AWSRequest(method="GET", url=url)
    S3SigV4Auth(creds, "s3", "us-east-1").add_auth(req)
    r = urllib.request.Request(url, headers=dict(req.headers), method="GET")
    with urllib.request.urlopen(r, timeout=30) as resp:
        if resp.status != 200:
            raise RuntimeError("GET %s: status %d" % (path, resp.status))
        return resp.read()


def keys(endpoint, creds, bucket):
    token = None
    out = []
    while True:
        q = {"list-type": "2"}
        if token:
            q["continuation-token"] = token
        body = get(endpoint, creds, "/" + bucket,
                   urllib.parse.urlencode(q, quote_via=urllib.parse.quote))
        root = ET.fromstring(body)
        # S3 answers in its 2006-03-01 namespace; s3rver in none
        ns = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
        if root.tag != ns + "ListBucketResult":
            raise RuntimeError("listing of %s: not a ListBucketResult" % bucket)
        for c in root.findall(ns + "Contents"):
            out.append(c.findtext(ns + "Key"))
        if len(out) > MAX_KEYS:
            raise RuntimeError("bucket %s: more than %d keys" % (bucket, MAX_KEYS))
        if root.findtext(ns + "IsTruncated") != "true":
            return out
        token = root.findtext(ns + "NextContinuationToken")
        if not token:
            raise RuntimeError("listing of %s: truncated, no token" % bucket)


def main():
    if len(sys.argv) != 4:
        sys.stderr.write("usage: s3_fetch.py ENDPOINT BUCKET DIR\n")
        return 2
    endpoint, bucket, dest = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
    creds = Credentials(os.environ["S3_ACCESS_KEY"], os.environ["S3_SECRET_KEY"])
    try:
        for key in keys(endpoint, creds, bucket):
            if key is None or key.endswith("/"):
                continue
            parts = key.split("/")
            if any(p in ("", ".", "..") for p in parts):
                raise RuntimeError("bucket %s: unsafe key %r" % (bucket, key))
            path = os.path.join(dest, *parts)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            data = get(endpoint, creds, "/%s/%s" % (bucket, key))
            with open(path, "wb") as f:
                f.write(data)
    except (RuntimeError, ET.ParseError, urllib.error.URLError, OSError) as e:
        sys.stderr.write("s3_fetch.py: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
