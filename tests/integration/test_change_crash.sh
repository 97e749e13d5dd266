#!/usr/bin/env bash
# test_change_crash.sh - a file rename, unlink or hard link on a mirror, killed
# (kill -9 of the daemon) after one replica made it and before the other
# did, is completed at the remount: the replicas agree again, and an
# event names the key (issue 8, "lose nothing"; mux_change.c).
#
# strace delays the second replica's renameat/unlinkat by 3 s, so the
# kill lands between the two. Before the fix nothing recorded the change:
# after the remount one replica held the new name and the other the old
# one (or the deleted file), for good - reads raced between them and a
# listing showed both names.
#   - mv a b (b absent): b on both, a on neither;
#   - mv a2 b2 over an existing b2: b2 holds a2's content on both;
#   - rm x: x on neither;
#   - ln l1 l2: l2 on both, a hard link of l1 on each (not a copy);
#   - a rename that ends normally leaves no note standing (nothing to
#     complete: no event updating a replica at the remount).
. "$(dirname "$0")/lib.sh"

command -v strace >/dev/null || fail "strace missing (scripts/install-deps.sh)"

M=$T/mnt
new_config "$T/ch.conf" m
cfg_mux m mirror "c1 c2"
cfg_file c1 "$T/c1"
cfg_file c2 "$T/c2"

# killed CALLS CMD...: CMD with c2's CALLS held, killed between the
# replicas (kill_between, lib.sh).
killed() {
	kill_between "$M" "$T/c2" "$@"
}

# agreed KEY TEST: after the remount, TEST holds within 10 s and an
# event names KEY, c1 (where the change happened) and c2 (completed) -
# not the reconcile of the create's write intent, which names the key
# with no replica to update.
agreed() {
	local key=$1 test=$2 i
	local ev="storage-mux.reconciled.*\"key\":\"$key\",\"source\":\"c1\",\"updated\":\\[\"c2\"\\]"
	for ((i = 0; i < 100; i++)); do
		eval "$test" && grep -q "$ev" "$T"/smuxfs.*.log && break
		sleep 0.1
	done
	eval "$test" || fail "$key: replicas still differ: c1: $(ls "$T/c1" | tr '\n' ' ') c2: $(ls "$T/c2" | tr '\n' ' ')"
	grep -q "$ev" "$T"/smuxfs.*.log ||
		fail "no reconciled event names $key, c1 and c2: $(grep -h reconciled "$T"/smuxfs.*.log)"
}

log "--- mv a b, killed between the replicas"
mount_smux "$T/ch.conf" "$M"
echo alpha >"$M/a"
DONE_ON_C1='[ -e "$T/c1/b" ] && [ ! -e "$T/c1/a" ]'
NOT_ON_C2='[ -e "$T/c2/a" ] && [ ! -e "$T/c2/b" ]'
killed renameat,renameat2 mv "$M/a" "$M/b"
mount_smux "$T/ch.conf" "$M"
agreed a '[ ! -e "$T/c2/a" ] && [ "$(cat "$T/c2/b" 2>&1)" = alpha ] && [ "$(cat "$T/c1/b" 2>&1)" = alpha ]'
[ "$(ls "$M" | tr '\n' ' ')" = "b " ] || fail "the mount lists: $(ls "$M" | tr '\n' ' ')"
unmount_smux "$M"

log "--- mv a2 b2 over an existing b2, killed between the replicas"
mount_smux "$T/ch.conf" "$M"
echo new >"$M/a2"
echo old >"$M/b2"
DONE_ON_C1='[ ! -e "$T/c1/a2" ]'
NOT_ON_C2='[ -e "$T/c2/a2" ] && [ "$(cat "$T/c2/b2")" = old ]'
killed renameat,renameat2 mv "$M/a2" "$M/b2"
mount_smux "$T/ch.conf" "$M"
agreed a2 '[ ! -e "$T/c2/a2" ] && [ "$(cat "$T/c2/b2" 2>&1)" = new ] && [ "$(cat "$T/c1/b2" 2>&1)" = new ]'
[ "$(cat "$M/b2")" = new ] || fail "b2 through the mount: $(cat "$M/b2" 2>&1)"
unmount_smux "$M"

log "--- rm x, killed between the replicas"
mount_smux "$T/ch.conf" "$M"
echo doomed >"$M/x"
DONE_ON_C1='[ ! -e "$T/c1/x" ]'
NOT_ON_C2='[ -e "$T/c2/x" ]'
killed unlinkat rm "$M/x"
mount_smux "$T/ch.conf" "$M"
agreed x '[ ! -e "$T/c2/x" ] && [ ! -e "$T/c1/x" ]'
[ ! -e "$M/x" ] || fail "x back through the mount"
unmount_smux "$M"

log "--- ln l1 l2 (a hard link), killed between the replicas"
mount_smux "$T/ch.conf" "$M"
echo linked >"$M/l1"
DONE_ON_C1='[ -e "$T/c1/l2" ]'
NOT_ON_C2='[ ! -e "$T/c2/l2" ]'
killed linkat ln "$M/l1" "$M/l2"
mount_smux "$T/ch.conf" "$M"
agreed l1 '[ "$(stat -c %i "$T/c2/l2" 2>&1)" = "$(stat -c %i "$T/c2/l1")" ] && [ "$(cat "$T/c2/l2")" = linked ]'
[ "$(stat -c %h "$M/l1")" = 2 ] || fail "l1 through the mount: $(stat -c %h "$M/l1") links"
unmount_smux "$M"

log "--- a rename that ends normally leaves nothing to complete"
mount_smux "$T/ch.conf" "$M"
echo fine >"$M/p"
mv "$M/p" "$M/q"
rm "$M/q"
crash_smux "$M"
mount_smux "$T/ch.conf" "$M"
sleep 1
# (the write intents of the two creates may be reconciled, as after any
# crash within 2 s of a write: with no replica to update)
! grep -q 'storage-mux.reconciled.*"key":"[pq]".*"updated":\["' "$T"/smuxfs.*.log ||
	fail "a finished rename or unlink was completed again: $(grep reconciled "$T"/smuxfs.*.log)"
[ -z "$(ls "$T/c1" "$T/c2" | grep -x '[pq]' || true)" ] || fail "p or q left on a replica"
unmount_smux "$M"
log "ok"
