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

# --- Swift ---

# start_logged_swift: the Swift make check shares (or one of this test's
# own, lib.sh's swift_server), its env sourced (SWIFT_AUTH_URL...), a
# token of our own for the markers (TOKEN, SURL, ACCT), PLOG its proxy's
# log, and reqs and mark for CONTAINER (set by the caller):
#   reqs: the client requests on CONTAINER, "METHOD PATH STATUS" a line
#     in log order (a request the proxy makes for itself, e.g. the copy
#     middleware's GET, has "-" as its client address: left out);
#   mark: a request of its own (a HEAD of an object never there), then
#     waits until the proxy logged it; prints the number of request
#     lines before it.
# Exports SMUX_IT_SWIFT_CRED for credentials_env.
start_logged_swift() {
	local hdrs
	swift_server
	# shellcheck disable=SC1091
	. "$SWIFT_DIR/env"
	PLOG=$SWIFT_DIR/log/proxy.log
	[ -f "$PLOG" ] || fail "no proxy log at $PLOG"
	export SMUX_IT_SWIFT_CRED=test:tester:testing
	hdrs=$(curl -sf -D - -o /dev/null -H "X-Auth-User: test:tester" \
		-H "X-Auth-Key: testing" "$SWIFT_AUTH_URL") || fail "no token"
	TOKEN=$(printf '%s\n' "$hdrs" | tr -d '\r' | sed -n 's/^[Xx]-[Aa]uth-[Tt]oken: //p')
	SURL=$(printf '%s\n' "$hdrs" | tr -d '\r' | sed -n 's/^[Xx]-[Ss]torage-[Uu]rl: //p')
	[ -n "$TOKEN" ] && [ -n "$SURL" ] || fail "no token in the auth answer"
	ACCT=${SURL##*/}
	reqs() {
		awk -v p="/v1/$ACCT/$CONTAINER" '$1 == "proxy:" && $2 != "-" &&
			index($6, p) == 1 { print $5, $6, $8 }' "$PLOG"
	}
	mark() {
		local m
		m=smux-marker-$(date +%s%N)
		curl -s -o /dev/null -I -H "X-Auth-Token: $TOKEN" "$SURL/$CONTAINER/$m" || true
		wait_logged "$m"
	}
}

# --- what a listing shows (test_s3_attrstore.sh, test_swift_attrstore.sh) ---

# lsr: what ls -lR of $M shows: names, types and modes, numeric owners,
# sizes, mtimes to the second, symlink targets (blanks squeezed).
lsr() { (cd "$M" && ls -lRn --time-style=+%s) | tr -s ' '; }

# file_heads BEFORE AFTER: the HEADs that found a file (200, a key not
# ending in '/', not a marker) between two marks, one path a line. (A
# directory "d" looked up is a HEAD of "d" that finds nothing, then of
# "d/".)
file_heads() {
	reqs_between "$1" "$2" |
		awk '$1 == "HEAD" && $3 == "200" && $2 !~ /\/$/ &&
			$2 !~ /smux-marker/ { print $2 }'
}

# listed_heads FILE [LISTER]: LISTER (default lsr) into FILE between two
# marks; prints the file_heads it sent.
listed_heads() {
	local before after
	before=$(mark)
	"${2:-lsr}" >"$1"
	after=$(mark)
	file_heads "$before" "$after"
}

# cat_tree N: cat of every file of attr_tree N; fails when that sent a
# HEAD of a file.
cat_tree() {
	local before after h d i
	before=$(mark)
	for d in a b; do
		for ((i = 1; i <= $1; i++)); do cat "$M/$d/f$i"; done
	done >/dev/null
	after=$(mark)
	h=$(file_heads "$before" "$after")
	[ -z "$h" ] || fail "cat of every file sent HEADs: $(echo $h)"
}

# attr_tree N: directories a and b of $M with N files each, a/f1 0600,
# a/f2 0751, a/f3 0640, a/f5 of mtime 1000000000, a/sym -> f1.
attr_tree() {
	local d i
	for d in a b; do
		mkdir "$M/$d"
		for ((i = 1; i <= $1; i++)); do printf '%s file %d\n' "$d" "$i" >"$M/$d/f$i"; done
	done
	chmod 0600 "$M/a/f1"
	chmod 0751 "$M/a/f2"
	chmod 0640 "$M/a/f3"
	touch -d @1000000000 "$M/a/f5"
	ln -s f1 "$M/a/sym"
}
