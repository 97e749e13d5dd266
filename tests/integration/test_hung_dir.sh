#!/usr/bin/env bash
# test_hung_dir.sh - a file backend whose directory hangs never hangs a
# request through the mount. A file backend on a local disk file system
# (ext4, xfs, btrfs, tmpfs...) runs its short calls on the request's own
# thread (SMUX_CAP_INLINE, two thread hand-offs fewer a call); one on a
# network or FUSE file system, whose calls can hang for good, must keep
# the bulkhead's workers and their deadline. Here the backend directory is
# another smuxfs mount whose daemon is stopped (SIGSTOP: every call into
# it waits): a lookup and a create through the outer mount answer an
# error within a few backend_timeouts, and the mount serves again once
# the inner daemon runs; a mirror with that directory as its second
# replica answers from the first; and a local disk's backend with such a
# mount below its root does not look it up on the request's thread. (The outer backend is a subdirectory of the
# inner mount: the root of a file backend's directory keeps its work
# folder, a name the inner mount keeps for its own.)
. "$(dirname "$0")/lib.sh"

new_config "$T/in.conf" r
cfg_file r "$T/r"
IN=$T/inner
mount_smux "$T/in.conf" "$IN"
ipid=$(daemon_pids_for "$IN" | head -1)
[ -n "$ipid" ] || fail "no daemon for $IN"

new_config "$T/out.conf" h backend_timeout=1s attr_timeout=0 \
	entry_timeout=0 negative_timeout=0
mkdir "$IN/d"
cfg_file h "$IN/d"
M=$T/mnt
mount_smux "$T/out.conf" "$M"
echo hello >"$M/f"
[ "$(cat "$M/f")" = hello ] || fail "f does not read back"

# timed CMD...: runs CMD under a 30 s timeout; sets rc and ms
timed() {
	local t0 t1
	t0=$(date +%s%N)
	rc=0
	timeout -k 5 30 "$@" >/dev/null 2>&1 || rc=$?
	t1=$(date +%s%N)
	ms=$(((t1 - t0) / 1000000))
}

kill -STOP "$ipid"
log "inner daemon $ipid stopped"
timed stat "$M/g"
stat_rc=$rc stat_ms=$ms
timed sh -c "echo x >'$M/h'"
create_rc=$rc create_ms=$ms
timed ls "$M"
ls_rc=$rc ls_ms=$ms
kill -CONT "$ipid"
log "inner daemon running again; with it stopped: stat rc $stat_rc in $stat_ms ms, create rc $create_rc in $create_ms ms, ls rc $ls_rc in $ls_ms ms"
for op in stat create ls; do
	r=${op}_rc t=${op}_ms
	[ "${!r}" != 124 ] || fail "$op through the mount hung with its directory (timeout 30 s)"
	[ "${!t}" -lt 10000 ] || fail "$op took ${!t} ms with backend_timeout = 1s"
done
[ "$stat_rc" != 0 ] || fail "stat of a name in a hung directory succeeded"

# serves again: the member is probed back up
for i in $(seq 1 100); do
	[ "$(cat "$M/f" 2>/dev/null)" = hello ] && break
	sleep 0.2
done
[ "$(cat "$M/f")" = hello ] || fail "f does not read back after the directory came back"
echo again >"$M/g" || fail "no create after the directory came back"
[ "$(cat "$T/r/d/g")" = again ] || fail "g is not in the inner backend"
unmount_smux "$M"

# The same for a mirror whose second replica is that directory, under
# [mount] backend_timeout, the default of every mux (s45-t1: the mux kept
# its own 30 s and a listing waited that long): ls and a create answer
# within a few of those, from the first replica.
mkdir -p "$IN/e"
new_config "$T/mir.conf" m backend_timeout=1s attr_timeout=0 \
	entry_timeout=0 negative_timeout=0
cfg_mux m mirror "l h"
cfg_file l "$T/l"
cfg_file h "$IN/e"
mount_smux "$T/mir.conf" "$M"
echo one >"$M/one"
kill -STOP "$ipid"
timed ls "$M"
ls_rc=$rc ls_ms=$ms
timed sh -c "echo two >'$M/two'"
create_rc=$rc create_ms=$ms
kill -CONT "$ipid"
log "mirror with its second replica stopped: ls rc $ls_rc in $ls_ms ms, create rc $create_rc in $create_ms ms"
[ "$ls_ms" -lt 10000 ] || fail "ls of the mirror took $ls_ms ms with backend_timeout = 1s"
[ "$create_ms" -lt 10000 ] || fail "a create on the mirror took $create_ms ms with backend_timeout = 1s"
[ "$ls_rc" = 0 ] || fail "ls of the mirror failed with one replica stopped"
unmount_smux "$M"
unmount_smux "$IN"

# A local disk's backend with a FUSE file system mounted below its root
# after the mount started (s45-t3): its calls ran on the request's thread
# (the root is ext4), and a lookup of the mount point hung with it. The
# backend reads the mount table again when it changes.
new_config "$T/loc.conf" lr backend_timeout=1s attr_timeout=0 \
	entry_timeout=0 negative_timeout=0
cfg_file lr "$T/lr"
mount_smux "$T/loc.conf" "$M"
echo here >"$M/here"
mkdir -p "$T/lr/sub"
new_config "$T/sub.conf" s
cfg_file s "$T/s"
mount_smux "$T/sub.conf" "$T/lr/sub"
spid=$(daemon_pids_for "$T/lr/sub" | head -1)
[ -n "$spid" ] || fail "no daemon for $T/lr/sub"
sleep 0.3 # the table is looked at again at most every 100 ms
kill -STOP "$spid"
timed ls "$M/sub/"
sub_rc=$rc sub_ms=$ms
# a file beside it reads once the member's cooldown (the breaker a timed
# out call trips) is over
here=
for _ in $(seq 1 50); do
	here=$(timeout -k 5 10 cat "$M/here" 2>/dev/null) && break
	sleep 0.1
done
kill -CONT "$spid"
log "local backend, FUSE mount below its root stopped: ls rc $sub_rc in $sub_ms ms, a file beside it reads '$here'"
[ "$sub_ms" -lt 10000 ] || fail "ls of a hung mount point below a local backend took $sub_ms ms"
[ "$here" = here ] || fail "a file beside the hung mount point is unreadable"
unmount_smux "$T/lr/sub"
unmount_smux "$M"
