#!/usr/bin/env bash
# test_cdn_faults.sh - issue 12's fault runs through a mount: a shield mux
# (origin: a file backend; mirrors: a swift backend through the identity
# v2.0 emulator tests/servers/swift_identity.py in front of a real Swift,
# and a bunny backend on tests/servers/bunny_emu.py). A copy loop like the
# integration programs' (cp, tar x, cat, rm) runs while
#   (a) every token is revoked, then tokens reach their expiry mid-run;
#   (b) Swift is unavailable for 10 s: the identity emulator answers 503 to
#       every storage request for 10 s (its "outage" knob). Not a stop of
#       Swift itself: `make check` shares one Swift between all its passes
#       and tests, and a restart takes seconds to minutes here; a 503 for
#       every request is what a client sees of a Swift proxy whose object
#       servers are away;
#   (c) a burst of 429s on the Bunny zone.
# No operation may fail. Afterwards the mux's pending hints drain to 0
# (`.smux/ctl repair` forces the replay) and the Swift container and the
# Bunny zone hold exactly the origin's files, byte for byte.
. "$(dirname "$0")/lib.sh"

command -v swift >/dev/null || fail "python3-swiftclient missing (scripts/install-deps.sh)"
command -v python3 >/dev/null || fail "python3 missing (scripts/install-deps.sh)"

# ---- servers: Swift (shared or our own), the identity emulator, Bunny ----
SW=${SMUX_TEST_SWIFT_DIR:-}
if [ -z "$SW" ]; then
	# outside $T: the harness deletes $T at exit, before the stopper
	# below reads the pids in it (memcached was left running)
	SW=$(mktemp -d /tmp/smux-swift.XXXXXX)
	"$SMUX_REPO/tests/servers/swift.sh" start "$SW" >/dev/null
	(tail --pid=$$ -f /dev/null 2>/dev/null
		"$SMUX_REPO/tests/servers/swift.sh" stop "$SW" >/dev/null 2>&1
		rm -rf "$SW") &
fi
# shellcheck disable=SC1091
. "$SW/env"

# start_py NAME SCRIPT ARGS...: runs a python server in the background; its
# port lands in $T/NAME/port (its command line names $T, so the harness's
# cleanup stops it even when this test fails). Sets PY_PID.
start_py() {
	local name=$1 script=$2 i
	shift 2
	mkdir -p "$T/$name"
	python3 "$SMUX_REPO/tests/servers/$script" "$T/$name/port" "$@" \
		>"$T/$name/server.log" 2>&1 &
	PY_PID=$!
	for ((i = 0; i < 300; i++)); do
		[ -s "$T/$name/port" ] && return 0
		kill -0 "$PY_PID" 2>/dev/null || { cat "$T/$name/server.log" >&2; fail "$name exited"; }
		sleep 0.1
	done
	fail "$name did not start"
}
APIKEY=0123456789abcdef0123456789abcdef
start_py idn swift_identity.py "$SWIFT_AUTH_URL" "$SWIFT_RACK_USER" \
	"$SWIFT_RACK_KEY" rackuser "$APIKEY" rackpass
PID_idn=$PY_PID
IDN=http://127.0.0.1:$(cat "$T/idn/port")
start_py bn bunny_emu.py "$T/bn/store" edge emu-secret
PID_bn=$PY_PID
BN=http://127.0.0.1:$(cat "$T/bn/port")
stop_servers() {
	kill -TERM "$PID_idn" "$PID_bn" 2>/dev/null || true
	wait "$PID_idn" "$PID_bn" 2>/dev/null || true
}
idn_ctl() { curl -sf -X POST -d "$1" "$IDN/control" >/dev/null; }
idn_stat() { curl -sf "$IDN/control/stats" | jq -r "$1"; }
log "identity emulator $IDN, bunny emulator $BN"

CONTAINER=cdnf-$$-$RANDOM
printf 'rackuser:%s\n' "$APIKEY" >"$T/swift.cred"
printf 'emu-secret\n' >"$T/bunny.key"
chmod 600 "$T/swift.cred" "$T/bunny.key"

CONF=$T/cdn.conf
new_config "$CONF" m
# max_cooldown 2 s: a mirror back from its outage is probed (and its hints
# replayed) within 2 s rather than the default's 60 s
cfg_mux m shield "origin sw bn" backend_timeout=30s max_cooldown=2s
cfg_file origin "$T/origin"
cfg_raw "[backend sw]
type = swift
auth_url = $IDN/v2.0
auth_version = 2
region = DFW
container = $CONTAINER
credentials_file = $T/swift.cred

[backend bn]
type = bunny
zone = edge
region = uk
endpoint = $BN
credentials_file = $T/bunny.key
"
M=$T/mnt
mount_smux "$CONF" "$M"

S=$T/src
make_tree "$S" 2 2
(cd "$S" && tar cf "$T/t.tar" .)
# one round of the programs: cp -r, tar x, cat of every file, rm of one
# tree; every command must succeed (set -e) and read back what it wrote
ROUND=0
round() {
	local d=$M/r$ROUND
	mkdir "$d"
	cp -r "$S" "$d/copy"
	mkdir "$d/untar"
	tar xf "$T/t.tar" -C "$d/untar"
	diff -r "$S" "$d/copy"
	find "$d/untar" -type f -exec cat {} + >/dev/null
	diff -r "$S" "$d/untar"
	echo "round $ROUND" >"$d/note"
	[ "$(cat "$d/note")" = "round $ROUND" ]
	rm -r "$d/untar"
	ROUND=$((ROUND + 1))
}
round
log "round 0 clean"

# (a) every token revoked mid-run (the next request meets a 401 and
# re-authenticates), and the new tokens live 63 s: the backend renews a
# token 60 s before it expires, so each is renewed ~3 s into its life,
# while the copies run
auth0=$(idn_stat .auth)
idn_ctl '{"revoke": true, "lifetime": 63}'
round
n=0
while [ "$(idn_stat .auth)" -lt $((auth0 + 2)) ]; do
	round
	n=$((n + 1))
	[ "$n" -lt 60 ] || fail "tokens were not renewed: $(idn_stat .auth) auths"
done
auth1=$(idn_stat .auth)
idn_ctl '{"lifetime": 3600}'
log "(a) revoke + expiring tokens: $((auth1 - auth0)) authentications in $((n + 1)) rounds, nothing failed"

# (b) Swift unavailable for 10 s: rounds until the outage is over
idn_ctl '{"outage": {"seconds": 10, "status": 503}}'
n=0
while [ "$(idn_stat '.outage_left > 0')" = true ]; do
	round
	n=$((n + 1))
	[ "$n" -lt 200 ] || fail "the outage never ended"
done
served=$(idn_stat .outage_served)
[ "$served" -ge 1 ] || fail "the outage answered no request"
log "sw after the outage: $(backend_stat "$M" sw status), consecutiveFailures $(backend_stat "$M" sw consecutiveFailures)"
log "(b) 10 s Swift outage: $n rounds, $served storage requests answered 503, nothing failed"

# (c) a burst of Bunny 429s
curl -sf -X POST "$BN/_emu/set?burst429=8&retry_after=0" >/dev/null
round
served429=$(curl -sf "$BN/_emu/stats" | jq -r .served429)
[ "$served429" -ge 1 ] || fail "the 429 burst was not served"
log "(c) Bunny 429 burst: $served429 answered, nothing failed"

# ---- the hints replay; both mirrors hold the origin's tree ----
end=$((SECONDS + 90))
while h=$(stats "$M" .pendingHints) && [ "$h" -ne 0 ]; do
	[ "$SECONDS" -lt "$end" ] || fail "pendingHints still $h after 90 s"
	echo repair >"$M/.smux/ctl" 2>/dev/null || true
	sleep 0.5
done
log "pending hints replayed (0 left) $((SECONDS - end + 90)) s after the last round"

(cd "$T/origin" && find . -type f ! -path './.smuxfs-tmp*' | sort) >"$T/want"
[ -s "$T/want" ] || fail "the origin holds no file"
# Swift, read with swiftclient through tempauth (the container lives in
# the rack account the emulator forwards to)
mkdir "$T/dl"
(cd "$T/dl" && swift -q -A "$SWIFT_AUTH_URL" -U "$SWIFT_RACK_USER" \
	-K "$SWIFT_RACK_KEY" download "$CONTAINER")
(cd "$T/dl" && find . -type f | sort) >"$T/got.swift"
diff "$T/want" "$T/got.swift" || fail "the Swift container holds another file set"
(cd "$T/bn/store/edge" && find . -type f | sort) >"$T/got.bunny"
diff "$T/want" "$T/got.bunny" || fail "the Bunny zone holds another file set"
while IFS= read -r rel; do
	cmp "$T/origin/$rel" "$T/dl/$rel"
	cmp "$T/origin/$rel" "$T/bn/store/edge/$rel"
done <"$T/want"
log "Swift and Bunny hold the origin's $(wc -l <"$T/want") files byte for byte"
for f in "$M/.smux/config" "$M/.smux/stats"; do
	grep -qe "$APIKEY" -e emu-secret "$f" && fail "a credential is in $f"
done

unmount_smux "$M"
stop_servers
if [ -z "${SMUX_TEST_SWIFT_DIR:-}" ]; then
	"$SMUX_REPO/tests/servers/swift.sh" stop "$SW" >/dev/null
fi
log "passed"
