#!/usr/bin/python3
"""s3probe.py ENDPOINT ACCESS SECRET [SECONDS]: waits until a SigV4-signed
S3 ListBuckets on ENDPOINT answers 200 (the test servers' readiness check),
polling every 0.2 s for at most SECONDS (default 0: one try). Exit 0 when
it answered, 1 otherwise. One process for the whole wait, so the loaded
machine pays Python's start-up once. Uses botocore's signer (Debian
python3-botocore) and the standard library."""
import sys
import time
import urllib.request

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def ready(endpoint, access, secret):
    req = AWSRequest(method="GET", url=endpoint + "/")
    S3SigV4Auth(Credentials(access, secret), "s3", "us-east-1").add_auth(req)
    prepared = urllib.request.Request(endpoint + "/", headers=dict(req.headers))
    try:
        with urllib.request.urlopen(prepared, timeout=5) as resp:
            return resp.status == 200
    except Exception:  # not up yet, refused, 5xx...
        return False


def main():
    endpoint, access, secret = sys.argv[1:4]
    limit = float(sys.argv[4]) if len(sys.argv) > 4 else 0
    end = time.monotonic() + limit
    while True:
        if ready(endpoint, access, secret):
            return 0
        if time.monotonic() >= end:
            print(f"s3probe: {endpoint} not ready after {limit:.0f}s",
                  file=sys.stderr)
            return 1
        time.sleep(0.2)


sys.exit(main())
