# req_log.sh - counting the requests a test server logged, for the tests
# that bound a mount's requests (test_s3_requests.sh, test_swift_requests.sh,
# test_s3_attrstore.sh). Sourced after lib.sh.

# wait_logged MARKER: waits (bounded) until a request line of the
# caller's reqs() names MARKER; prints the number of request lines before
# it. The servers log each request when its answer is sent, so every
# request sent before the marker's is in the log before it.
wait_logged() {
	local i n
	for ((i = 0; i < 400; i++)); do
		n=$(reqs | grep -n "/$1 " | head -n 1 | cut -d: -f1 || true)
		if [ -n "$n" ]; then
			echo $((n - 1))
			return 0
		fi
		sleep 0.05
	done
	fail "marker $1 never logged"
}

# reqs_between BEFORE AFTER: the request lines between two marks.
reqs_between() {
	reqs | sed -n "$(($1 + 2)),$(($2))p"
}

# --- s3rver ---

# start_logged_s3rver BUCKET: an s3rver of this test's own (FORCE_COLOR=1
# keeps the method and URL in its log lines) with BUCKET made; sets S3D,
# EP, SLOG, stop_s3, and reqs and mark for it:
#   reqs: the lines of its log that are requests (method, URL, status),
#     colours off;
#   mark: a request of its own (a unique URL), then waits until s3rver
#     logged it; prints the number of request lines before it.
start_logged_s3rver() {
	S3D=$T/s3rver
	FORCE_COLOR=1 "$SMUX_REPO/tests/servers/s3rver.sh" start "$S3D" >/dev/null ||
		fail "s3rver did not start"
	stop_s3() { "$SMUX_REPO/tests/servers/s3rver.sh" stop "$S3D" >/dev/null 2>&1 || true; }
	EP=$(sed -n 's/^S3_ENDPOINT=//p' "$S3D/env")
	SLOG=$S3D/log/s3rver.log
	reqs() {
		sed 's/\x1b\[[0-9;]*m//g' "$SLOG" |
			awk '$1 == "info:" && $2 ~ /^[A-Z]+$/ && $4 ~ /^[0-9][0-9][0-9]$/ { print $2, $3, $4 }'
	}
	mark() {
		local m
		m=m$(date +%s%N)
		curl -s -o /dev/null "$EP/smux-marker/$m" || true
		wait_logged "$m"
	}
	curl -sf -X PUT "$EP/$1" >/dev/null || { stop_s3; fail "cannot create bucket"; }
}
