#!/usr/bin/env bash
# test_dav_rclone.sh - a shield [origin = file, dav = `rclone serve
# webdav`] whose WebDAV member is drained while files are written into
# new directories, then undrained (found by an outside tester, s44-t2).
#
# rclone (Go's x/net/webdav) answers a PUT into a collection it lacks
# with 404, where Apache, lighttpd and nginx answer 409. The replay of a
# file ran before the one of its new directory: the put's 404 was taken
# for the origin's "not found", the replay deleted the key on the replica
# and ended the hint - files acknowledged, missing on the replica, and
# unreadable through the mount once the origin was out. A 404 to a put
# of a key under a directory now makes the directory and puts again, and
# a replica's own "not found" never ends a hint.
. "$(dirname "$0")/lib.sh"

command -v rclone >/dev/null ||
	fail "rclone missing (scripts/install-deps.sh installs it)"
mkdir -p "$T/dav" "$T/origin"
port=$(free_port)
rclone serve webdav "$T/dav" --addr "127.0.0.1:$port" >"$T/rclone.log" 2>&1 </dev/null &
RCLONE_PID=$!
for ((i = 0; i < 100; i++)); do
	curl -s -o /dev/null "http://127.0.0.1:$port/" && break
	sleep 0.1
done
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data x "http://127.0.0.1:$port/nodir/x")
log "rclone serve webdav on port $port: a PUT into a missing collection answers $code"
# the case this test is for (another rclone may answer otherwise)
[ "$code" = 404 ] || fail "rclone answered $code to a PUT into a missing collection, not 404"
rm -rf "$T/dav/nodir"

new_config "$T/c.conf" m
cfg_mux m shield "origin dav" backend_timeout=5s
cfg_file origin "$T/origin"
cfg_raw "[backend dav]
type = http
url = http://127.0.0.1:$port/
"
M=$T/mnt
CTL=$M/.smux/ctl
mount_smux "$T/c.conf" "$M"

# written while dav is up: a put into a new nested directory
mkdir -p "$M/up/a/b"
echo up >"$M/up/a/b/f"
[ "$(cat "$T/dav/up/a/b/f")" = up ] || fail "up/a/b/f not on rclone"

timeout 20 sh -c "echo 'drain dav' >'$CTL'" || fail "drain dav"
for d in 1 2 3 4 5 6; do
	mkdir -p "$M/s$d/deep"
	for f in 1 2 3; do
		echo "data $d $f" >"$M/s$d/f$f"
	done
	echo "deep $d" >"$M/s$d/deep/g"
done
timeout 20 sh -c "echo 'undrain dav' >'$CTL'" || fail "undrain dav"
repair_settled "$M" 60
diff -r -x .smuxfs-tmp "$T/origin" "$T/dav" >&2 || fail "rclone's replica differs from the origin after the replay"

# the replica alone serves every file
timeout 20 sh -c "echo 'drain origin' >'$CTL'" || fail "drain origin"
for d in 1 2 3 4 5 6; do
	for f in 1 2 3; do
		[ "$(timeout 20 cat "$M/s$d/f$f")" = "data $d $f" ] ||
			fail "s$d/f$f through rclone alone"
	done
	[ "$(timeout 20 cat "$M/s$d/deep/g")" = "deep $d" ] || fail "s$d/deep/g through rclone alone"
done
timeout 20 sh -c "echo 'undrain origin' >'$CTL'" || fail "undrain origin"
log "every file replayed to rclone and served by it alone"
unmount_smux "$M"
kill "$RCLONE_PID" 2>/dev/null || true
wait "$RCLONE_PID" 2>/dev/null || true
