#!/bin/sh
# tests/servers/s3rver.sh start|stop DIR - s3rver (npm, pinned in
# tests/package.json and its lockfile) on 127.0.0.1, for tests and benches.
#
# start: installs tests/node_modules with `npm ci` when it is missing or
# older than the lockfile, fixes s3rver's early PUT answer (see below),
# starts s3rver on a free loopback port with its data in DIR/data (pid in
# DIR/pids, its request log in DIR/log/s3rver.log),
# waits (bounded) until it answers a signed ListBuckets, then prints and
# writes to DIR/env:
#   S3_ENDPOINT=http://127.0.0.1:PORT S3_REGION=us-east-1
#   S3_ACCESS_KEY=S3RVER S3_SECRET_KEY=S3RVER
# s3rver does not verify signatures or payload hashes and ignores If-Match
# on GET (see ../shared/notes/network-backends-research.md); use swift.sh
# for strict S3. Node 20 refuses the cipher of s3rver 3.7.1's continuation
# tokens (every listing over 1000 keys fails with 500) unless
# NODE_OPTIONS=--openssl-legacy-provider, which this script sets.
# stop: kills what start started (also callable from a trap; idempotent).
# S3RVER_PORT=N start: listens on port N rather than a free one (a test
# that stops the server and starts it again on the same port and data).
# Exit status: 0 ok, 1 failure (the log is printed), 2 usage.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tests=$(dirname "$here")
. "$here/lib.sh"

[ $# -eq 2 ] || {
	echo "usage: $0 start|stop DIR" >&2
	exit 2
}
cmd=$1
dir=$2
case $cmd in
stop)
	srv_stop_all "$dir"
	exit 0
	;;
start) ;;
*)
	echo "usage: $0 start|stop DIR" >&2
	exit 2
	;;
esac

for b in node npm; do
	command -v "$b" >/dev/null 2>&1 || {
		echo "s3rver.sh: $b missing (scripts/install-deps.sh installs it)" >&2
		exit 1
	}
done
main="$tests/node_modules/s3rver/bin/s3rver.js"
if [ ! -f "$main" ] || [ "$tests/package-lock.json" -nt "$main" ]; then
	(cd "$tests" && npm ci --no-audit --no-fund --loglevel=error) >&2 || {
		echo "s3rver.sh: npm ci in $tests failed" >&2
		exit 1
	}
	touch "$main"
fi

# s3rver 3.7.1's file store answers a PUT (and an UploadPart) once the
# body has gone through its md5 transform, before the write stream has
# written the file: a HEAD, GET, CopyObject or CompleteMultipartUpload
# right after the 200 may find it empty or short (a rename through a mount
# copied 0 bytes of a file just closed; issue 12, test_model.sh s3-mirror).
# It is made to answer once the file is written, as S3 does.
# Its listings with a delimiter do not walk below a common prefix, so a
# prefix that only keys two or more levels down imply (a/b/c with no
# a/x: a directory made by the aws CLI, by another client) is never
# listed: `ls` of the parent did not show it, and a daemon that knows a
# directory's names from its listing (dirnames.c) took it for absent. It
# is made to walk them, as S3 lists every common prefix.
# Both are checked at every start and applied once.
/usr/bin/python3 - "$tests/node_modules/s3rver/lib/stores/filesystem.js" <<'PY' || exit 1
import os, sys
p = sys.argv[1]
fixes = [
    ("""          .on('error', reject)
          .on('finish', () => resolve([totalLength, md5Context.digest('hex')]))
          .pipe(writeStream);""",
     """          .on('error', reject)
          .pipe(writeStream)
          .on('error', reject)
          .on('finish', () => resolve([totalLength, md5Context.digest('hex')]));"""),
    ("""        .on('error', reject)
        .on('finish', () => {
          resolve([totalLength, md5Context.digest('hex')]);
        })
        .pipe(writeStream);""",
     """        .on('error', reject)
        .pipe(writeStream)
        .on('error', reject)
        .on('finish', () => {
          resolve([totalLength, md5Context.digest('hex')]);
        });"""),
    ("""      if (dirPath.startsWith(prefixPath)) {
        if (
          delimiterEnc &&
          dirPath.slice(prefixPath.length).indexOf(delimiterEnc) !== -1
        ) {
          // avoid directories occurring beneath a common prefix
          return false;
        }
      } else if (!prefixPath.startsWith(dirPath)) {""",
     """      if (dirPath.startsWith(prefixPath)) {
        // walked beneath a common prefix too: a key deeper down is what
        // makes it one (smuxfs: tests/servers/s3rver.sh)
      } else if (!prefixPath.startsWith(dirPath)) {"""),
]
s = t = open(p).read()
for bad, good in fixes:
    if good in t:
        continue
    if t.count(bad) != 1:
        sys.exit("s3rver.sh: %s is not s3rver 3.7.1's: cannot fix it" % p)
    t = t.replace(bad, good)
if t != s:
    with open(p + ".tmp", "w") as f:
        f.write(t)
    os.replace(p + ".tmp", p)
PY

# Its CopyObject decodes x-amz-copy-source with decodeURI, which leaves
# %40 (@), %3A, %2B, %3D, %26, %24, %2C, %3B, %23 and %3F encoded: a rename
# of "@@@x.TMP" (dbench) looked for a source named "%40%40%40x.TMP" and
# failed. S3 decodes the header fully (botocore encodes every character
# but -._~/); made to decode each path segment the same way.
/usr/bin/python3 - "$tests/node_modules/s3rver/lib/controllers/object.js" <<'PY' || exit 1
import os, sys
p = sys.argv[1]
bad = "let copySource = decodeURI(ctx.headers['x-amz-copy-source']);"
good = ("let copySource = ctx.headers['x-amz-copy-source']"
        ".split('/').map(decodeURIComponent).join('/');")
t = open(p).read()
if good not in t:
    if t.count(bad) != 1:
        sys.exit("s3rver.sh: %s is not s3rver 3.7.1's: cannot fix its copy" % p)
    with open(p + ".tmp", "w") as f:
        f.write(t.replace(bad, good))
    os.replace(p + ".tmp", p)
PY

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -s "$dir/pids" ]; then
	echo "s3rver.sh: $dir is in use (run stop first)" >&2
	exit 1
fi
srv_starting "$dir"
trap 'rc=$?; if [ $rc -ne 0 ]; then srv_dump_logs "$dir"; srv_stop_all "$dir"; fi' EXIT
mkdir -p "$dir/data"

port=${S3RVER_PORT:-$(srv_free_ports 1)}
case $port in
*[!0-9]* | '') echo "s3rver.sh: S3RVER_PORT is not a port" >&2; exit 2 ;;
esac
NODE_OPTIONS="${NODE_OPTIONS:+$NODE_OPTIONS }--openssl-legacy-provider" \
	srv_spawn "$dir" s3rver node "$main" -d "$dir/data" -a 127.0.0.1 \
	-p "$port" --no-vhost-buckets

endpoint="http://127.0.0.1:$port"
/usr/bin/python3 "$here/s3probe.py" "$endpoint" S3RVER S3RVER 60

srv_started "$dir"
cat >"$dir/env" <<ENV
S3_ENDPOINT=$endpoint
S3_REGION=us-east-1
S3_ACCESS_KEY=S3RVER
S3_SECRET_KEY=S3RVER
ENV
cat "$dir/env"
