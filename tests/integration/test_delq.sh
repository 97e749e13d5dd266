#!/usr/bin/env bash
# test_delq.sh - the delete queue (src/fs/delq.c) on a mount of one s3
# backend over an s3rver this test starts: unlinks acknowledged once
# journaled and queued, deleted in batches (DeleteObjects), with the
# barriers a local filesystem's user counts on.
#
#  - rm -r of a tree of 3 directories and 90 files sends a few batch
#    deletes, not a DELETE per file, and when rm returns the server holds
#    none of it (rmdir waited for its directory's deletes);
#  - a name unlinked is gone at once for the mount (stat, ls) though its
#    delete may still be queued; a new file of the same name, and a file
#    renamed onto it, are not removed by the queued delete (after a
#    remount they are still there);
#  - fsync of the directory returns once its unlinks are stored;
#  - an unmount right after rm deletes what was queued;
#  - a crash (kill -9) while the server does not answer: the unlinks are
#    in the journal, the next mount deletes them before serving, except a
#    name another client wrote again since (kept);
#  - delete_batch = off: one DELETE per file, as before.
#
# test_delq.sh single: the root is the s3 backend alone (its batches are
# DeleteObjects). test_delq.sh mirror: a mirror of two buckets on the
# same server (key by key, in parallel, on both replicas); every check of
# the server holds on both buckets.
. "$(dirname "$0")/lib.sh"

KIND=${1:-single}
. "$(dirname "$0")/req_log.sh"
B=smux-delq
B2=smux-delq2
start_logged_s3rver "$B"
curl -sf -X PUT "$EP/$B2" >/dev/null || fail "cannot create bucket $B2"
export S3T_ACCESS_KEY_ID=S3RVER S3T_SECRET_ACCESS_KEY=S3RVER

# config FILE [MOUNTKEY=VALUE...]: a mount of the s3 backend alone, or of
# a mirror of two
config() {
	local f=$1 root=s
	shift
	[ "$KIND" = mirror ] && root=m
	new_config "$f" "$root" "$@"
	cfg_raw "[backend s]
type = s3
endpoint = $EP
bucket = $B
credentials_env = S3T
"
	[ "$KIND" = mirror ] || return 0
	cfg_raw "[backend s2]
type = s3
endpoint = $EP
bucket = $B2
credentials_env = S3T

[mux m]
mode = mirror
backends = s, s2"
}

# srv_count1 BUCKET PREFIX: objects BUCKET holds under PREFIX
srv_count1() {
	curl -sf "$EP/$1?list-type=2&prefix=$2&max-keys=1000" |
		{ grep -o '<Key>' || true; } | wc -l
}
# srv_count PREFIX: objects the first bucket holds under PREFIX; on a
# mirror, fails unless the second holds as many
srv_count() {
	local a b
	a=$(srv_count1 "$B" "$1")
	if [ "$KIND" = mirror ]; then
		b=$(srv_count1 "$B2" "$1")
		[ "$a" = "$b" ] || fail "replicas differ under $1: $a and $b objects"
	fi
	echo "$a"
}
# srv_get KEY: the object's content on the server ("" when absent); on a
# mirror, fails unless the second bucket holds the same
srv_get() {
	local a b
	a=$(curl -sf "$EP/$B/$1" || true)
	if [ "$KIND" = mirror ]; then
		b=$(curl -sf "$EP/$B2/$1" || true)
		[ "$a" = "$b" ] || fail "replicas differ on $1: '$a' and '$b'"
	fi
	printf '%s' "$a"
}

# deletes PREFIX_BEFORE PREFIX_AFTER: delete requests between two marks
# ("DELETE n POST-delete m")
deletes() {
	reqs_between "$1" "$2" | awk '
		$1 == "DELETE" { d++ }
		$1 == "POST" && $2 ~ /[?&]delete/ { p++ }
		END { printf "DELETE %d POST-delete %d\n", d, p }'
}

CONF=$T/delq.conf
config "$CONF" attr_timeout=3600 entry_timeout=3600
M=$T/mnt
mount_smux "$CONF" "$M"

mkdir "$M/d" "$M/e" "$M/e/a" "$M/e/b"
for i in $(seq 1 30); do
	printf 'd %d\n' "$i" >"$M/d/f$i"
	printf 'a %d\n' "$i" >"$M/e/a/g$i"
	printf 'b %d\n' "$i" >"$M/e/b/h$i"
	printf 'e %d\n' "$i" >"$M/e/k$i"
done
[ "$(srv_count e/)" -ge 90 ] || fail "the tree was not stored: $(srv_count e/)"

log "rm -r of 3 directories, 90 files"
before=$(mark)
rm -r "$M/e"
# rmdir of each directory waited for its deletes: nothing is left now
left=$(srv_count e/)
after=$(mark)
[ "$left" -eq 0 ] || fail "rm -r returned with $left objects of e/ on the server"
[ ! -e "$M/e" ] || fail "e still shows after rm -r"
counts=$(deletes "$before" "$after")
log "rm -r: $counts"
read -r _ ndel _ npost <<<"$counts"
if [ "$KIND" = single ]; then
	# per directory at most a few batches and the marker DELETEs (dirs: 3)
	[ $((ndel + npost)) -le 20 ] ||
		fail "rm -r of 90 files sent $ndel DELETEs and $npost batch deletes (one per file before the queue)"
	[ "$npost" -ge 1 ] || fail "rm -r sent no batch delete: $counts"
else
	# key by key on each replica
	[ "$ndel" -ge 180 ] && [ "$npost" -eq 0 ] || fail "mirror rm -r: $counts"
fi

[ "$(stats "$M" .deleteQueue.enabled)" = true ] &&
	[ "$(stats "$M" .deleteQueue.deleted)" -ge 90 ] &&
	[ "$(stats "$M" .deleteQueue.queued)" -eq 0 ] ||
	fail ".smux/stats deleteQueue: $(jq -c .deleteQueue "$M/.smux/stats")"
grep -Eq '^smux_delete_queue_deleted_total (9[0-9]|[1-9][0-9]{2,})$' "$M/.smux/metrics" &&
	grep -q '^smux_delete_queue_names 0$' "$M/.smux/metrics" ||
	fail ".smux/metrics: $(grep smux_delete_queue "$M/.smux/metrics" | tr '\n' ' ')"

log "a name unlinked is gone at once; a new file of that name stays"
rm "$M/d/f1"
[ ! -e "$M/d/f1" ] || fail "d/f1 still shows after rm"
ls "$M/d" | grep -qx f1 && fail "ls still lists d/f1 after rm"
printf 'new\n' >"$M/d/f1"
[ "$(cat "$M/d/f1")" = new ] || fail "d/f1 made again does not read back"
rm "$M/d/f2"
printf 'renamed\n' >"$M/d/src"
mv "$M/d/src" "$M/d/f2"
[ "$(cat "$M/d/f2")" = renamed ] || fail "d/f2 renamed onto does not read back"
# a symlink and a directory made over an unlinked name
rm "$M/d/f6" "$M/d/f7"
ln -s f1 "$M/d/f6"
mkdir "$M/d/f7"
[ -L "$M/d/f6" ] && [ -d "$M/d/f7" ] || fail "symlink or mkdir over unlinked names"

log "fsync of the directory stores its unlinks"
rm "$M/d/f3" "$M/d/f4"
python3 -c "import os; fd = os.open('$M/d', os.O_RDONLY); os.fsync(fd)"
[ -z "$(srv_get d/f3)" ] && [ -z "$(srv_get d/f4)" ] ||
	fail "d/f3 or d/f4 still on the server after fsync(d)"

log "unmount right after rm"
rm "$M"/d/f1[0-9] "$M"/d/f2[0-9] "$M"/d/f30
unmount_smux "$M"
[ "$(srv_count d/f)" -eq 7 ] ||
	fail "after the unmount the server holds $(srv_count d/f) d/f* objects, want 7 (f1 f2 f5 f6 f7/ f8 f9): $(curl -s "$EP/$B?list-type=2&prefix=d/f" | grep -o '<Key>[^<]*' | tr '\n' ' ')"
[ "$(srv_get d/f1)" = new ] || fail "d/f1 made after its unlink is gone from the server"
[ "$(srv_get d/f2)" = renamed ] || fail "d/f2 renamed onto is gone from the server"
ls "$T/state/delq/" | grep -q '^del-queue' &&
	fail "a journal stays after a clean unmount: $(ls "$T/state/delq/")"

mount_smux "$CONF" "$M"
[ "$(cat "$M/d/f1")" = new ] && [ "$(cat "$M/d/f2")" = renamed ] ||
	fail "after a remount d/f1 or d/f2 lost"
[ -L "$M/d/f6" ] && [ -d "$M/d/f7" ] || fail "after a remount d/f6 or d/f7 lost"
[ "$(ls "$M/d" | wc -l)" -eq 7 ] || fail "d holds $(ls "$M/d" | tr '\n' ' ')"

log "a crash while the server does not answer"
mkdir "$M/c"
for i in $(seq 1 20); do printf 'c %d\n' "$i" >"$M/c/k$i"; done
ls -l "$M/c" >/dev/null
S3PID=$(head -n 1 "$S3D/pids")
kill -STOP "$S3PID"
# names, not a glob: a glob lists the directory, which asks the server
timeout 20 rm $(printf "$M/c/k%d " $(seq 1 20)) || { kill -CONT "$S3PID"; fail "rm hung on a server that does not answer"; }
[ ! -e "$M/c/k3" ] || { kill -CONT "$S3PID"; fail "c/k3 shows after rm"; }
crash_smux "$M"
kill -CONT "$S3PID"
J=$(ls "$T"/state/delq/del-queue.*.jsonl)
[ "$(wc -l <"$J")" -eq 20 ] || fail "the journal holds $(wc -l <"$J") lines, want 20"
# what the stopped server had received it did once it went on; the rest
# is still there. On a mirror the kill may fall between the deletes of
# one key on the two buckets: they agree again after the replay below
sleep 0.5
n=$(srv_count1 "$B" c/k)
log "after the crash the server holds $n of 20"
# another client writes c/k20 again before the next mount: it stays
curl -sf -X PUT --data-binary 'other client' "$EP/$B/c/k20" >/dev/null
[ "$KIND" = mirror ] &&
	curl -sf -X PUT --data-binary 'other client' "$EP/$B2/c/k20" >/dev/null
# on a mirror the crash may fall between the deletes of one key on the
# two buckets: c/k1 is gone from the first only, c/k2 from the second
# only (whichever the replay reads first, one of them is absent there)
if [ "$KIND" = mirror ]; then
	curl -sf -X DELETE "$EP/$B/c/k1" >/dev/null
	curl -sf -X PUT --data-binary $'c 1\n' "$EP/$B2/c/k1" >/dev/null
	curl -sf -X PUT --data-binary $'c 2\n' "$EP/$B/c/k2" >/dev/null
	curl -sf -X DELETE "$EP/$B2/c/k2" >/dev/null
fi
mount_smux "$CONF" "$M"
[ "$(srv_count c/k)" -eq 1 ] ||
	fail "after the remount the server holds $(srv_count c/k) c/k* objects, want 1 (c/k20)"
[ "$(cat "$M/c/k20")" = "other client" ] || fail "c/k20 written by another client was deleted"
[ "$(ls "$M/c")" = k20 ] || fail "c lists $(ls "$M/c" | tr '\n' ' ')"
[ ! -e "$J" ] || fail "the crashed run's journal $J stays after its replay"
grep -q "has changed since" "$T"/smuxfs.*.log || fail "the kept c/k20 was not logged"
unmount_smux "$M"

if [ "$KIND" = mirror ]; then
	stop_s3
	log "queued unlinks on a mirror: barriers, crash replay"
	exit 0
fi
log "a delete that fails is kept, the name hidden, and sent again"
CONF3=$T/retry.conf
config "$CONF3" attr_timeout=3600 entry_timeout=3600 backend_timeout=2s
mount_smux "$CONF3" "$M"
mkdir "$M/r"
printf 'r\n' >"$M/r/x"
printf 'r\n' >"$M/r/y"
stat "$M/r/x" "$M/r/y" >/dev/null
kill -STOP "$S3PID"
rm "$M/r/x"
for ((i = 0; i < 100; i++)); do
	[ "$(stats "$M" .deleteQueue.retried)" -ge 1 ] && break
	sleep 0.1
done
[ "$(stats "$M" .deleteQueue.retried)" -ge 1 ] &&
	[ "$(stats "$M" .deleteQueue.queued)" -eq 1 ] ||
	{ kill -CONT "$S3PID"; fail "no failed delete kept: $(jq -c .deleteQueue "$M/.smux/stats")"; }
[ ! -e "$M/r/x" ] || { kill -CONT "$S3PID"; fail "r/x shows while its delete is kept"; }
# fsync of the directory waits for it and reports the failure
python3 -c "import os; fd = os.open('$M/r', os.O_RDONLY); os.fsync(fd)" 2>/dev/null &&
	{ kill -CONT "$S3PID"; fail "fsync(r) returned 0 with its unlink not stored"; }
kill -CONT "$S3PID"
for ((i = 0; i < 200; i++)); do
	[ "$(stats "$M" .deleteQueue.queued)" -eq 0 ] && break
	sleep 0.1
done
[ "$(stats "$M" .deleteQueue.queued)" -eq 0 ] || fail "the kept delete was not sent again"
[ -z "$(srv_get r/x)" ] || fail "r/x still on the server after the retry"
[ "$(srv_get r/y)" = r ] || fail "r/y lost"
python3 -c "import os; fd = os.open('$M/r', os.O_RDONLY); os.fsync(fd)" ||
	fail "fsync(r) fails after the retry"
unmount_smux "$M"

log "delete_batch = off: a DELETE per file"
CONF2=$T/off.conf
config "$CONF2" delete_batch=off
mount_smux "$CONF2" "$M"
mkdir "$M/o"
for i in 1 2 3 4 5; do printf 'o\n' >"$M/o/x$i"; done
before=$(mark)
rm "$M"/o/x*
after=$(mark)
counts=$(deletes "$before" "$after")
read -r _ ndel _ npost <<<"$counts"
[ "$ndel" -eq 5 ] && [ "$npost" -eq 0 ] || fail "delete_batch = off: $counts"
[ "$(stats "$M" .deleteQueue.enabled)" = false ] || fail "delete_batch = off: the queue runs"
unmount_smux "$M"
stop_s3
log "queued unlinks: batches, barriers, crash replay, delete_batch = off"
