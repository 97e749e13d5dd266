#!/usr/bin/env bash
# test_meta_crash.sh - a chmod, touch, create, mkdir, symlink or setfattr
# (of a file or a directory) on a mirror, killed (kill -9 of the daemon)
# after one replica made it and before the other did, leaves the replicas
# agreeing again after the remount (issue 8, "lose nothing": the change was never
# acknowledged, so either outcome is right, but one for good - not a mode,
# a time, a directory or an attribute that depends on which replica
# answers).
#
# strace delays the second replica's call (its openat2 of the key, or its
# mkdirat/renameat) by 3 s, so the kill lands between the two. Before the
# fix nothing recorded these changes: after the remount the replicas kept
# differing for good (a failover to c2 showed the old mode, no directory,
# no symlink, no attribute).
. "$(dirname "$0")/lib.sh"

command -v strace >/dev/null || fail "strace missing (scripts/install-deps.sh)"
command -v setfattr >/dev/null || fail "setfattr missing (scripts/install-deps.sh)"

M=$T/mnt
new_config "$T/mc.conf" m
cfg_mux m mirror "c1 c2"
cfg_file c1 "$T/c1"
cfg_file c2 "$T/c2"

# killed CALLS CMD...: CMD with c2's CALLS held, killed between the
# replicas (kill_between, lib.sh).
killed() {
	kill_between "$M" "$T/c2" "$@"
}

# intents_ended: waits (10 s at most) until the mux's journal holds no
# write intent (the creates' end 2 s after their writers close): a kill
# while one stands would pass through that intent's own reconcile, and
# prove nothing about the change killed.
intents_ended() {
	local j=$T/state/mc/m.hints i
	for ((i = 0; i < 100; i++)); do
		python3 - "$j" <<'PY' && return 0
import json, sys
standing = set()
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("op") == "hint" and r.get("kind") == "intent":
        standing.add(r["id"])
    elif r.get("op") == "done":
        standing.discard(r["id"])
sys.exit(1 if standing else 0)
PY
		sleep 0.1
	done
	fail "a write intent still stands in $j after 10 s"
}

# agreed KEY WHAT: after the remount, WHAT (a command printing what the
# replicas must agree on, with %s for the replica's root) prints the same
# for c1 and c2 within 10 s, and an event names KEY as reconciled.
agreed() {
	local key=$1 what=$2 i a b
	local ev="storage-mux.reconciled.*\"key\":\"$key\""
	for ((i = 0; i < 100; i++)); do
		a=$(eval "$(printf "$what" "$T/c1")" 2>&1 || true)
		b=$(eval "$(printf "$what" "$T/c2")" 2>&1 || true)
		[ "$a" = "$b" ] && grep -q "$ev" "$T"/smuxfs.*.log && break
		sleep 0.1
	done
	[ "$a" = "$b" ] || fail "$key: replicas still differ: c1: $a; c2: $b"
	grep -q "$ev" "$T"/smuxfs.*.log ||
		fail "no reconciled event names $key: $(grep -h reconciled "$T"/smuxfs.*.log)"
	log "$key: both $a"
}

log "--- chmod 600 f, killed between the replicas"
mount_smux "$T/mc.conf" "$M"
echo data >"$M/f"
intents_ended
DONE_ON_C1='[ "$(stat -c %a "$T/c1/f")" = 600 ]'
NOT_ON_C2='[ "$(stat -c %a "$T/c2/f")" = 644 ]'
killed openat2 chmod 600 "$M/f"
mount_smux "$T/mc.conf" "$M"
agreed f 'stat -c %%a %s/f'
unmount_smux "$M"

log "--- touch -d 2001-01-01 t, killed between the replicas"
mount_smux "$T/mc.conf" "$M"
echo data >"$M/t"
intents_ended
DONE_ON_C1='[ "$(stat -c %Y "$T/c1/t")" = 978307200 ]'
NOT_ON_C2='[ "$(stat -c %Y "$T/c2/t")" != 978307200 ]'
killed openat2 touch -h -d @978307200 "$M/t"
mount_smux "$T/mc.conf" "$M"
agreed t 'stat -c %%Y %s/t'
unmount_smux "$M"

log "--- setfattr -n user.k -v v x, killed between the replicas"
mount_smux "$T/mc.conf" "$M"
echo data >"$M/x"
intents_ended
DONE_ON_C1='getfattr --absolute-names -n user.k "$T/c1/x" >/dev/null 2>&1'
NOT_ON_C2='! getfattr --absolute-names -n user.k "$T/c2/x" >/dev/null 2>&1'
killed openat2 setfattr -n user.k -v v "$M/x"
mount_smux "$T/mc.conf" "$M"
agreed x 'getfattr --absolute-names --only-values -n user.k %s/x'
unmount_smux "$M"

log "--- setfattr on a directory (its marker key dd/ since s43), killed between the replicas"
mount_smux "$T/mc.conf" "$M"
mkdir "$M/dd"
touch -d @1000000000 "$T/c1/dd" # the replicas' directory mtimes differ
DONE_ON_C1='getfattr --absolute-names -n user.k "$T/c1/dd" >/dev/null 2>&1'
NOT_ON_C2='! getfattr --absolute-names -n user.k "$T/c2/dd" >/dev/null 2>&1'
killed openat2 setfattr -n user.k -v w "$M/dd"
mount_smux "$T/mc.conf" "$M"
agreed dd/ 'getfattr --absolute-names --only-values -n user.k %s/dd'
unmount_smux "$M"

log "--- touch n (a create, no write), killed between the replicas"
mount_smux "$T/mc.conf" "$M"
intents_ended
DONE_ON_C1='[ -e "$T/c1/n" ]'
NOT_ON_C2='[ ! -e "$T/c2/n" ]'
killed openat2 touch "$M/n"
mount_smux "$T/mc.conf" "$M"
agreed n 'stat -c %%F %s/n'
unmount_smux "$M"

log "--- mkdir d, killed between the replicas"
mount_smux "$T/mc.conf" "$M"
DONE_ON_C1='[ -d "$T/c1/d" ]'
NOT_ON_C2='[ ! -e "$T/c2/d" ]'
killed mkdirat mkdir "$M/d"
mount_smux "$T/mc.conf" "$M"
agreed d/ 'stat -c %%F %s/d'
unmount_smux "$M"

log "--- ln -s target s, killed between the replicas"
mount_smux "$T/mc.conf" "$M"
DONE_ON_C1='[ -L "$T/c1/s" ]'
NOT_ON_C2='[ ! -e "$T/c2/s" ] && [ ! -L "$T/c2/s" ]'
killed renameat,renameat2 ln -s target "$M/s"
mount_smux "$T/mc.conf" "$M"
agreed s 'readlink %s/s'
unmount_smux "$M"
log "ok"
