#!/usr/bin/python3
"""s3probe.py ENDPOINT ACCESS SECRET: exit 0 when a SigV4-signed S3
ListBuckets on ENDPOINT answers 200 (the test servers' readiness check).
Uses botocore's signer (Debian python3-botocore) and the standard library
only; every failure exits 1 quickly (2 s timeout)."""
import sys
import urllib.request

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def main():
    endpoint, access, secret = sys.argv[1:4]
    req = AWSRequest(method="GET", url=endpoint + "/")
    S3SigV4Auth(Credentials(access, secret), "s3", "us-east-1").add_auth(req)
    prepared = urllib.request.Request(endpoint + "/", headers=dict(req.headers))
    try:
        with urllib.request.urlopen(prepared, timeout=2) as resp:
            return 0 if resp.status == 200 else 1
    except Exception:  # not up yet, refused, 5xx...
        return 1


sys.exit(main())
