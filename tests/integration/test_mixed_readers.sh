#!/usr/bin/env bash
# test_mixed_readers.sh - readers of a mirror whose replicas are of
# different kinds: a local directory (f) and nginx WebDAV (d) (and an
# s3rver, for tail -f). Their
# version tokens differ (f: size and mtime; nginx: its own ETag), so a
# reader's version is checked on the replica it reads, by that replica's
# token (smux_reader_current).
#
# A CI run of test_s3_faults-stop (session 41's stop) failed: `cat` of a
# file written while s3 was out got ESTALE once s3 was back. Its reader
# had been opened on WebDAV; a change elsewhere on the mount made it check
# its version, by a head of the mux that s3 (first in order) answered
# with a token that was not the one pinned. Here the same with f out
# (drained) at the open: the reader reads d; f back; a file written
# elsewhere; the rest of the reader's file must read whole. And the other
# way round. A change of the file behind the mount, on the replica the
# reader reads, is still ESTALE: never bytes of two versions.
. "$(dirname "$0")/lib.sh"

start_nginx_dav "$T/ng"
# 14 MB: more than the kernel reads ahead at the first read
seq 1 2000000 >"$T/want"
seq 2 2000001 >"$T/want2" # another version, of another size
size=$(wc -c <"$T/want")

# open_on X OTHER NAME: fd 3 reads NAME on mount $M, opened while OTHER
# was drained (so on X); its first 100 bytes read; OTHER back and up
open_on() {
	# the pages cp left in the kernel's cache would serve every read:
	# they go, so the reads reach the daemon
	python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$M/$3"
	echo "drain $2" >"$M/.smux/ctl" || fail "drain $2"
	exec 3<"$M/$3"
	head -c 100 <&3 >/dev/null
	echo "undrain $2" >"$M/.smux/ctl" || fail "undrain $2"
	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(backend_stat "$M" "$2" status)" = up ] && return 0
		sleep 0.1
	done
	fail "$2 not up 10 s after its undrain: $(backend_stat "$M" "$2" status)"
}

# rest_or_estale WANT WHAT: the rest of fd 3 (its first 100 bytes read)
# is WANT's, or the read fails with ESTALE - never bytes of another
# version; fd 3 is closed
rest_or_estale() {
	local rc=0
	cat <&3 >"$T/rest" 2>"$T/cat.err" || rc=$?
	exec 3<&-
	if [ "$rc" = 0 ]; then
		tail -c +101 "$1" | cmp - "$T/rest" || fail "$2: bytes of another version"
		log "$2: read whole"
	else
		grep -q "Stale file handle" "$T/cat.err" || fail "$2: rc $rc ($(cat "$T/cat.err"))"
		log "$2: $(cat "$T/cat.err")"
	fi
}

# scenario MODE on|off: the runs on a MODE mux of [f, d], with the read
# cache on or off
scenario() {
	local mode=$1 cache=$2 first other rc got
	new_config "$T/c-$mode-$cache.conf" m read_cache=$cache
	cfg_mux m "$mode" "f d"
	cfg_file f "$T/f-$mode-$cache"
	cfg_raw "[backend d]
type = http
url = $DAV_URL/$mode-$cache/
"
	M=$T/mnt-$mode-$cache
	# place NAME: the file on both replicas (failover writes the first
	# member only: there, behind the mount)
	place() {
		if [ "$mode" = mirror ]; then
			cp "$T/want" "$M/$1"
		else
			cp "$T/want" "$T/f-$mode-$cache/$1"
			cp "$T/want" "$T/ng/root/$mode-$cache/$1"
		fi
	}
	mkdir -p "$T/ng/root/$mode-$cache" "$T/f-$mode-$cache"
	mount_smux "$T/c-$mode-$cache.conf" "$M"

	for first in d f; do
		other=d
		[ "$first" = d ] && other=f
		place "x-$first"
		open_on "$first" "$other" "x-$first"
		# a change elsewhere on the mount: the reader checks its version
		echo other >"$M/elsewhere-$first"
		rc=0
		cat <&3 >"$T/rest" 2>"$T/cat.err" || rc=$?
		exec 3<&-
		[ "$rc" = 0 ] ||
			fail "a reader opened on $first, $other back, after a change elsewhere: rc $rc ($(cat "$T/cat.err"))"
		tail -c +101 "$T/want" | cmp - "$T/rest" ||
			fail "a reader opened on $first, $other back, after a change elsewhere: read wrong bytes"
		log "$mode, read_cache $cache: a reader opened on $first reads on after a change elsewhere, $other back"
	done

	# the file changed behind the mount on d, the replica the reader reads
	# (another size: nginx's ETag is mtime and size, to the second): the
	# reader reads the version it opened whole (the read cache fetched it
	# ahead) or gets ESTALE, never the old bytes and then the new ones
	place x-d
	open_on d f x-d
	printf 'changed\n' | dd of="$T/ng/root/$mode-$cache/x-d" bs=1 seek=$((size - 300)) conv=notrunc status=none
	echo appended >>"$T/ng/root/$mode-$cache/x-d"
	echo again >"$M/elsewhere-d"
	rest_or_estale "$T/want" "$mode, read_cache $cache: a reader of a copy changed behind the mount"

	# the file rewritten through the mount while a reader reads d's copy
	# (failover: the write goes to f, which d never sees): the reader
	# reads on in the new version, as a local reader of a file rewritten
	# in place does, or gets ESTALE - never more of the old version
	place x-w
	open_on d f x-w
	cp "$T/want2" "$M/x-w"
	rest_or_estale "$T/want2" "$mode, read_cache $cache: a reader of a file rewritten through the mount"
	unmount_smux "$M"
}

# mirror and failover (reads go to f once it is back: a pinned get there
# of d's token fails), with the read cache on (the default: reads of the
# version opened are served from its copy) and off (every read asks the
# reader)
for mode in mirror failover; do
	scenario $mode on
	scenario $mode off
done

# A reader on d when nginx stops answering (SIGSTOP): it goes on reading
# f's copy of the same write (f keeps the mtime to the nanosecond, nginx
# to the second: the same write there). Before, ESTALE for every read
# until nginx was back (s42-t1).
new_config "$T/c-stop.conf" m read_cache=off
cfg_mux m mirror "f d" backend_timeout=2s
cfg_file f "$T/f-stop"
cfg_raw "[backend d]
type = http
url = $DAV_URL/stop/
"
mkdir -p "$T/ng/root/stop" "$T/f-stop"
M=$T/mnt-stop
mount_smux "$T/c-stop.conf" "$M"
cp "$T/want" "$M/x"
open_on d f x
kill -STOP "$NGINX_PID"
rc=0
timeout 60 cat <&3 >"$T/rest" 2>"$T/cat.err" || rc=$?
kill -CONT "$NGINX_PID"
exec 3<&-
[ "$rc" = 0 ] || fail "a reader on d, nginx stopped: rc $rc ($(cat "$T/cat.err"))"
tail -c +101 "$T/want" | cmp - "$T/rest" || fail "a reader on d, nginx stopped: wrong bytes"
log "a reader on d read on from f while nginx was stopped"

unmount_smux "$M"

# tail -f of a log appended through the mount (`echo >>`, each a commit)
# on a mirror [s3, local], read cache off: a member that cannot write in
# place (s3) makes every append a new file on the local one too; tail's
# reader, opened on the local file (a descriptor, which follows its
# file), had kept the first one: it printed the log's first line, or the
# first few, for good (s42-t1: 3 rounds in 6)
use_s3rver
new_config "$T/c-tail.conf" m read_cache=off
cfg_mux m mirror "s f"
cfg_file f "$T/f-tail"
cfg_raw "[backend s]
type = s3
endpoint = $S3_EP
bucket = $S3_BUCKET
credentials_env = S3RV
"
M=$T/mnt-tail
mount_smux "$T/c-tail.conf" "$M"
echo "line 0" >"$M/log"
timeout 60 tail -f "$M/log" >"$T/tail.out" 2>"$T/tail.err" &
tailpid=$!
(
	for ((i = 1; i <= 40; i++)); do
		echo "line $i" >>"$M/log" || echo "append $i failed" >&2
		sleep 0.2 # pacing: appends tail sees one by one, not a wait
	done
) &
wait $!
for ((i = 0; i < 50; i++)); do
	[ "$(tail -n 1 "$T/tail.out" 2>/dev/null)" = "line 40" ] && break
	sleep 0.2
done
kill "$tailpid" 2>/dev/null || true
wait "$tailpid" 2>/dev/null || true
seq 0 40 | sed 's/^/line /' >"$T/tail.want"
cmp "$T/tail.want" "$T/tail.out" ||
	fail "tail -f printed $(wc -l <"$T/tail.out") lines, the last '$(tail -n 1 "$T/tail.out")' (want line 40): $(cat "$T/tail.err")"
log "tail -f of a log appended through the mount: all 41 lines"
unmount_smux "$M"

# touch and chmod of a file through the mount while a reader reads it on
# WebDAV (one member): the content is the same, so the reader reads on.
# A touch makes nginx's version (size and mtime) another one, and every
# read after it was ESTALE (s42 note).
for cache in on off; do
	new_config "$T/c-touch-$cache.conf" d read_cache=$cache
	cfg_raw "[backend d]
type = http
url = $DAV_URL/touch-$cache/
"
	mkdir -p "$T/ng/root/touch-$cache"
	M=$T/mnt-touch-$cache
	mount_smux "$T/c-touch-$cache.conf" "$M"
	cp "$T/want" "$M/x"
	for op in "touch -d 2001-01-01" "chmod 600" "touch"; do
		exec 3<"$M/x"
		head -c 100 <&3 >/dev/null
		$op "$M/x"
		rc=0
		cat <&3 >"$T/rest" 2>"$T/cat.err" || rc=$?
		exec 3<&-
		[ "$rc" = 0 ] || fail "read_cache $cache: a reader after $op: rc $rc ($(cat "$T/cat.err"))"
		tail -c +101 "$T/want" | cmp - "$T/rest" ||
			fail "read_cache $cache: a reader after $op read wrong bytes"
	done
	unmount_smux "$M"
done
log "a WebDAV reader reads on across touch and chmod through the mount"
