#!/usr/bin/env bash
# test_dbench.sh MODE - Debian's dbench (the NetBench file-server load:
# creates, writes, reads, renames over open and temporary names, unlinks,
# directory scans, byte-range locks, from 2 clients at once) on a mount,
# every operation's result checked by dbench against what a Windows file
# server returned; then the replicas compared.
#
# MODE: one of lib.sh's standard local configurations (mode_config) or a
# network mode of net_config (s3, s3-mirror, ...). Found on s3: a rename
# of "@@@CDRW.TMP" failed with ENOENT (the test server decoded
# x-amz-copy-source with decodeURI; tests/servers/s3rver.sh).
#
# SMUX_IT_DBENCH_SECS (default 10 local, 15 on network modes; 25 reaches
# the load file's COREL renames on s3rver, whose "@@@CDRW.TMP" test_s3.sh
# now renames itself) bounds the run.
. "$(dirname "$0")/lib.sh"

MODE=${1:?usage: test_dbench.sh MODE}
M=$T/mnt
CONF=$T/$MODE.conf
command -v dbench >/dev/null ||
	fail "dbench missing (scripts/install-deps.sh installs it)"
LOAD=/usr/share/dbench/client.txt
[ -f "$LOAD" ] || fail "$LOAD missing (Debian's dbench package)"

NET=0
case $MODE in s3 | http | s3-mirror | s3-shield | bunny | swift) NET=1 ;; esac
if [ "$NET" = 1 ]; then
	net_config "$MODE" "$CONF"
	SECS=${SMUX_IT_DBENCH_SECS:-15}
else
	mode_config "$MODE" "$CONF"
	SECS=${SMUX_IT_DBENCH_SECS:-10}
fi
mount_smux "$CONF" "$M"

rc=0
timeout $((SECS + 120)) dbench -c "$LOAD" -D "$M" -t "$SECS" 2 \
	>"$T/dbench.out" 2>&1 || rc=$?
grep -E 'ERROR|failed|Throughput' "$T/dbench.out" | head -20 >&2
[ "$rc" -eq 0 ] || fail "dbench exited $rc on $MODE"
! grep -q 'ERROR' "$T/dbench.out" || fail "dbench reported errors on $MODE"
grep -q '^Throughput' "$T/dbench.out" || fail "dbench did not finish"
log "dbench: $(grep '^Throughput' "$T/dbench.out")"
ls -lR "$M" >/dev/null

unmount_smux "$M"
if [ "$NET" = 0 ]; then
	# every replica holds the same tree (dbench deletes its files at the
	# end: what is left must match)
	mapfile -t dirs < <(mode_backing_dirs "$CONF")
	if [ "$MODE" = mirror ] && [ ${#dirs[@]} -ge 2 ]; then
		diff -r "${dirs[0]}" "${dirs[1]}" >&2 ||
			fail "the replicas differ after dbench"
	fi
fi
stop_net_servers
