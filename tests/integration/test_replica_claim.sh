#!/usr/bin/env bash
# test_replica_claim.sh - one daemon at a time keeps replicas in a
# directory (found by an outside tester, s44-t1). Two daemons mounting a
# mirror (or failover) over the same directories each kept their own
# repair hints: one's replay copied its older version over the other's
# acknowledged write, both O_EXCL creates of a name succeeded with a
# different file on each replica, appends ended in a different order on
# each. A second daemon is now refused at mount, naming the directory,
# its key and the first daemon's pid; a directory mounted alone (no
# hints) is not, and the claim dies with its daemon (kill -9).
. "$(dirname "$0")/lib.sh"

new_config "$T/c1.conf" m
cfg_mux m mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
new_config "$T/c2.conf" m
cfg_mux m failover "a2 c"
cfg_raw "[backend a2]
type = file
path = $T/a/
"
cfg_file c "$T/c"
new_config "$T/c3.conf" a3
cfg_raw "[backend a3]
type = file
path = $T/a
"
mount_smux "$T/c1.conf" "$T/m1"
pid1=$(pgrep -f "$T/c1.conf $T/m1" | head -1)
echo one >"$T/m1/f"

mkdir -p "$T/m2"
rc=0
timeout 30 "$SMUXFS" "$T/c2.conf" "$T/m2" >"$T/second.out" 2>&1 || rc=$?
log "a second daemon over a: exit $rc: $(cat "$T/second.out")"
[ "$rc" != 0 ] || { fusermount3 -u "$T/m2"; fail "a second daemon keeping replicas in a mounted"; }
grep -q "\[backend a2\] path $T/a/ (line [0-9]*): another smuxfs daemon (pid $pid1) keeps replicas there" "$T/second.out" ||
	fail "the refusal does not name the key, its line and the first daemon: $(cat "$T/second.out")"
mountpoint -q "$T/m2" && fail "m2 is mounted"

# a directory mounted alone keeps no hints: allowed beside it
mount_smux "$T/c3.conf" "$T/m3"
[ "$(cat "$T/m3/f")" = one ] || fail "f through the mount of a alone"
unmount_smux "$T/m3"

# the claim dies with its daemon: a kill -9, and the second mounts at once
crash_smux "$T/m1"
mount_smux "$T/c2.conf" "$T/m2"
[ "$(cat "$T/m2/f")" = one ] || fail "f through the second mount"

# `add` of a's directory to a mirror of one member (which claimed
# nothing at its mount) is refused while the second daemon holds it
new_config "$T/c4.conf" m4
cfg_mux m4 mirror "x"
cfg_file x "$T/x"
cfg_raw "[backend y]
type = file
path = $T/a
"
mount_smux "$T/c4.conf" "$T/m4"
rc=0
timeout 30 sh -c "echo 'add y' >'$T/m4/.smux/ctl'" 2>"$T/add.err" || rc=$?
[ "$rc" != 0 ] || fail "add of a directory another daemon keeps replicas in succeeded"
grep -qs "another smuxfs daemon (pid [0-9]*) keeps replicas there" "$T"/smuxfs.*.log ||
	fail "add y was refused, but not for the claim: $(cat "$T/add.err")"
[ "$(jq -r '.backends | length' "$T/m4/.smux/stats")" = 1 ] || fail "m4 has $(jq -r '.backends | length' "$T/m4/.smux/stats") members"
unmount_smux "$T/m4"
[ -z "$(ls -A "$T/a/.smuxfs-tmp")" ] || fail "files in a's work folder: $(ls -A "$T/a/.smuxfs-tmp")"
unmount_smux "$T/m2"
