#!/bin/bash
# tests/servers/shared.sh run CMD... - runs CMD with the S3 test servers
# (swift.sh: Swift + s3api, strict; s3rver.sh) started once for all of it,
# instead of once per test binary and pass: `make check` runs its passes
# this way. The servers live in a new temp directory, SMUX_TEST_SERVERS,
# as $SMUX_TEST_SERVERS/swift and $SMUX_TEST_SERVERS/s3rver (each with its
# env file: S3_ENDPOINT, S3_ACCESS_KEY...); tests that find it use them and
# start nothing, tests without it start their own. SMUX_TEST_SWIFT_DIR
# names the Swift alone (what the swift backend's tests look for). Both are stopped when CMD
# ends, also when it fails or the run is interrupted. Exit status: CMD's,
# or 1 when a server does not start (its log is printed).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

[ "${1:-}" = run ] && [ $# -ge 2 ] || {
	echo "usage: $0 run CMD..." >&2
	exit 2
}
shift

dir=$(mktemp -d "${TMPDIR:-/tmp}/smux-servers.XXXXXX")
stop() {
	"$here/swift.sh" stop "$dir/swift" >/dev/null 2>&1
	"$here/s3rver.sh" stop "$dir/s3rver" >/dev/null 2>&1
	rm -rf "$dir"
}
trap stop EXIT
trap 'exit 130' INT TERM

# Both start at once: Swift's five Python servers take most of the time.
mkdir -p "$dir/swift" "$dir/s3rver"
"$here/swift.sh" start "$dir/swift" >/dev/null &
swift_pid=$!
"$here/s3rver.sh" start "$dir/s3rver" >/dev/null &
s3rver_pid=$!
rc=0
wait "$swift_pid" || rc=1
wait "$s3rver_pid" || rc=1
if [ "$rc" -ne 0 ]; then
	echo "shared.sh: a test server did not start (logs above)" >&2
	exit 1
fi
echo "shared.sh: Swift at $(grep S3_ENDPOINT "$dir/swift/env"), s3rver at $(grep S3_ENDPOINT "$dir/s3rver/env")"

export SMUX_TEST_SERVERS=$dir
# the swift backend's tests (tests/support/swift_server.c) take this one
export SMUX_TEST_SWIFT_DIR=$dir/swift
"$@"
