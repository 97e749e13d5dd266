#!/usr/bin/python3
"""s3_sign_crosscheck.py DRIVER [COUNT] [SEED]

Cross-checks smuxfs's SigV4 signer (src/backends/s3_sign.c) against
botocore's (Debian python3-botocore). Generates COUNT requests (default 500,
seed fixed unless given) with awkward keys (spaces, + % * ~, unicode,
control characters, '..' segments), query strings (bare names, values with
'/', '=', '&', unicode), headers (repeated names, inner blanks and tabs,
x-amz-meta-*), session tokens, UNSIGNED-PAYLOAD and presigned URLs; signs
each with botocore and with DRIVER (`test_s3_sign --driver`: one JSON request
a line on stdin, one JSON answer a line on stdout); compares the
signatures. botocore encodes the path and query itself (quote with
safe='/~' and '-_.~', as its S3 serializer does), so the encodings are
checked too. Prints the first mismatches and "N passed, M failed"; exits 0
only when nothing failed.
"""
import datetime
import hashlib
import json
import random
import subprocess
import sys
import types
from urllib.parse import quote

try:
    from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth, SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
except ImportError as e:  # a skip here would hide a broken CI: fail
    print(f"s3_sign_crosscheck: botocore missing ({e}); "
          "scripts/install-deps.sh installs python3-botocore",
          file=sys.stderr)
    sys.exit(1)

AWKWARD = (list("abcXYZ0189-._~ +%*=&?#/!$'()[]@:,;\t\x01\x1f\x7f")
           + ["\u00e9", "\u00fc", "\u4e2d", "\U0001f600", "..", "//"])
HOSTS = ["examplebucket.s3.amazonaws.com", "s3.eu-west-1.amazonaws.com",
         "127.0.0.1:9000", "localhost:41234", "bucket.example.com"]
REGIONS = ["us-east-1", "eu-west-1", "ap-southeast-2", "garage"]
METHODS = ["GET", "PUT", "HEAD", "DELETE", "POST"]
QNAMES = ["prefix", "delimiter", "continuation-token", "list-type",
          "max-keys", "encoding-type", "uploadId", "partNumber",
          "start-after", "x-id", "a b", "\u00e9t\u00e9", "k/ey", "k=e&y"]
HNAMES = ["Range", "Content-Type", "Content-MD5", "If-Match",
          "If-None-Match", "x-amz-meta-mtime", "x-amz-meta-mode",
          "X-Amz-Meta-Uid", "x-amz-copy-source", "Cache-Control"]


def text(rng, n, alphabet):
    return "".join(rng.choice(alphabet) for _ in range(n))


def gen(rng, i):
    """One request as the driver's JSON and what botocore needs."""
    key = text(rng, rng.randint(1, 24), AWKWARD)
    path = "/" + (rng.choice(["bucket/", ""]) + key if rng.random() < 0.9
                  else "")
    query = []
    names = rng.sample(QNAMES, rng.randint(0, 4))
    for n in names:
        if rng.random() < 0.15:
            query.append([n, None])  # a bare name, "?uploads"
        else:
            query.append([n, text(rng, rng.randint(0, 12),
                                  AWKWARD[:-6] + ["\u00e9", "/"])])
    headers = []
    for _ in range(rng.randint(0, 4)):
        name = rng.choice(HNAMES)
        # printable ASCII with inner runs of blanks and tabs
        v = text(rng, rng.randint(1, 16), list("ab Z09\"/,;=- \t"))
        if not v.strip():
            v = "x" + v + "y"
        headers.append([name, v])
    unsigned = rng.random() < 0.2
    presign = rng.choice([0, 0, 0, 60, 3600, 604800])
    body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
    if presign:
        body = b""  # botocore would move a body into the query
    return {
        "method": rng.choice(METHODS),
        "host": rng.choice(HOSTS),
        "path": path,
        "query": query,
        "headers": headers,
        # presigned: no payload hash given (UNSIGNED-PAYLOAD by default)
        "payload_hash": (None if presign else "UNSIGNED-PAYLOAD" if unsigned
                         else hashlib.sha256(body).hexdigest()),
        "now": rng.randint(946684800, 1924991999),
        "region": rng.choice(REGIONS),
        "service": "s3",
        "access_key": "AKID" + text(rng, 16, list("ABCDEFGHIJ0123456789")),
        "secret_key": text(rng, 40, list("abcdefXYZ0123456789+/")),
        "token": (text(rng, rng.randint(20, 600),
                       list("abcXYZ019+/=")) if rng.random() < 0.3
                  else None),
        "presign": presign,
        "_body": body,
        "_unsigned": unsigned,
    }


def botocore_sign(r):
    """botocore's signature for request r (its own encodings)."""
    scheme = "https" if r["_unsigned"] else "http"
    url = f"{scheme}://{r['host']}" + quote(r["path"] or "/", safe="/~")
    params = None
    if any(v is None for _, v in r["query"]):
        # bare names: botocore takes the query from the URL as is
        url += "?" + "&".join(
            quote(n, safe="-_.~") if v is None
            else f"{quote(n, safe='-_.~')}={quote(v, safe='-_.~')}"
            for n, v in r["query"])
    elif r["query"]:
        params = {n: v for n, v in r["query"]}
    req = AWSRequest(method=r["method"], url=url, params=params,
                     data=r["_body"] or None)
    for n, v in r["headers"]:
        req.headers[n] = v  # email.message semantics: appends repeats
    creds = Credentials(r["access_key"], r["secret_key"], r["token"])
    ts = datetime.datetime.fromtimestamp(
        r["now"], datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    if r["presign"]:
        auth = S3SigV4QueryAuth(creds, "s3", r["region"],
                                expires=r["presign"])
    else:
        auth = S3SigV4Auth(creds, "s3", r["region"])
    req.context["timestamp"] = ts
    if r["_unsigned"]:
        req.context["client_config"] = types.SimpleNamespace(
            s3={"payload_signing_enabled": False})
    # add_auth() without its clock: the same steps with our timestamp
    auth._modify_request_before_signing(req)
    canonical = auth.canonical_request(req)
    sts = auth.string_to_sign(req, canonical)
    return auth.signature(sts, req), canonical


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    driver = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 20261201
    rng = random.Random(seed)
    reqs = [gen(rng, i) for i in range(count)]
    lines = "".join(
        json.dumps({k: v for k, v in r.items() if not k.startswith("_")})
        + "\n" for r in reqs)
    proc = subprocess.run([driver, "--driver"], input=lines.encode(),
                          capture_output=True, timeout=120)
    if proc.returncode != 0:
        print(f"driver exited {proc.returncode}: "
              f"{proc.stderr.decode(errors='replace')[-2000:]}",
              file=sys.stderr)
        return 1
    answers = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    if len(answers) != count:
        print(f"driver gave {len(answers)} answers for {count}",
              file=sys.stderr)
        return 1
    passed = failed = 0
    for r, a in zip(reqs, answers):
        want, canonical = botocore_sign(r)
        if a["rc"] == 0 and a["signature"] == want:
            passed += 1
            continue
        failed += 1
        if failed <= 3:
            print(f"MISMATCH rc={a['rc']} request="
                  f"{json.dumps({k: v for k, v in r.items() if k[0] != '_'})}"
                  f"\n--- botocore canonical request:\n{canonical}"
                  f"\n--- smuxfs canonical request:\n"
                  f"{a.get('canonical_request')}\n", file=sys.stderr)
    print(f"botocore cross-check: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


sys.exit(main())
