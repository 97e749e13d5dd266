#!/usr/bin/python3
"""s3probe.py ENDPOINT ACCESS SECRET [SECONDS]: waits until the S3 server on
ENDPOINT serves a whole object round trip (the test servers' readiness
check), polling every 0.2 s for at most SECONDS (default 0: one try). Exit 0
when it did, 1 otherwise.

Ready means: a SigV4-signed ListBuckets answers 200, and a probe bucket can
be made, an object put into it and both deleted again. ListBuckets alone
proves the proxy, tempauth, s3api and Swift's account server; the round
trip also proves the container and object servers, which a loaded machine
starts seconds later (a test's first CreateBucket was answered 503 "Please
reduce your request rate" in 1 run of 2 beside other work).

One process for the whole wait, so the loaded machine pays Python's start-up
once. Uses botocore's signer (Debian python3-botocore) and the standard
library."""
import sys
import time
import urllib.error
import urllib.request

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

PROBE_BUCKET = "smux-ready-probe"


def call(endpoint, creds, method, path, body=b""):
    """One signed request; its status, or 0 when it got no HTTP answer."""
    url = endpoint + path
    req = AWSRequest(method=method, url=url, data=body)
    S3SigV4Auth(creds, "s3", "us-east-1").add_auth(req)
    prepared = urllib.request.Request(url, data=body if method == "PUT" else None,
                                      headers=dict(req.headers), method=method)
    try:
        with urllib.request.urlopen(prepared, timeout=5) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception:  # not up yet, refused, reset...
        return 0


def ready(endpoint, creds):
    if call(endpoint, creds, "GET", "/") != 200:
        return False
    if call(endpoint, creds, "PUT", f"/{PROBE_BUCKET}") not in (200, 409):
        return False
    ok = call(endpoint, creds, "PUT", f"/{PROBE_BUCKET}/probe", b"ready") == 200
    call(endpoint, creds, "DELETE", f"/{PROBE_BUCKET}/probe")
    gone = call(endpoint, creds, "DELETE", f"/{PROBE_BUCKET}") in (204, 404)
    return ok and gone


def main():
    endpoint, access, secret = sys.argv[1:4]
    limit = float(sys.argv[4]) if len(sys.argv) > 4 else 0
    creds = Credentials(access, secret)
    end = time.monotonic() + limit
    while True:
        if ready(endpoint, creds):
            return 0
        if time.monotonic() >= end:
            print(f"s3probe: {endpoint} not ready after {limit:.0f}s",
                  file=sys.stderr)
            return 1
        time.sleep(0.2)


sys.exit(main())
