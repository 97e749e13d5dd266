#!/usr/bin/env bash
# test_failover_rmdir.sh - `rm -rf` of a directory on a failover mount
# [p, s] while p, the first member, is out (a faulty backend switched at
# run time, and a drain).
#
# In failover p holds the tree; s holds what was copied there by other
# means and what was written while p was out. A directory whose files
# only p held listed empty from s during p's outage: `rm -rf D` removed
# the directory with a delete hint for p, and that hint failed (p's D
# still held D/one) at every repair from then on, while `ls` showed D and
# `ls D` failed (s43-t5). Refusing the removal during the outage instead
# (ENOTEMPTY) made every `mktemp -d ... rm -rf` fail then, and left the
# directories made on s behind for good (s44-t4). Now the removal goes as
# the program saw it, and the replay of a directory's delete that p
# answers "not empty" ends: the program removed what it saw, p's own
# files stay, and so does their directory.
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" m
cfg_mux m failover "p s" backend_timeout=2s cooldown=200ms max_cooldown=200ms
cfg_faulty p p_in
cfg_file p_in "$T/p"
cfg_file s "$T/s"
M=$T/mnt
CTL=$M/.smux/ctl
mount_smux "$T/c.conf" "$M"

mkdir "$M/D" "$M/E"
echo one >"$M/D/one"
echo e >"$M/E/e"
[ -f "$T/p/D/one" ] || fail "D/one not written to p, the first member"
# the standby, kept in sync by other means: it has D with an older file
# (x) but not D/one, and E without E/e
mkdir -p "$T/s/D" "$T/s/E"
echo x >"$T/s/D/x"

# round 1: p failing (every call errs), so reads fail over to s; a
# listing marks it down
echo "fault p error_rate=1" >"$CTL"
ls "$M" >/dev/null
[ "$(backend_stat "$M" p status)" = down ] || fail "p not down: $(backend_stat "$M" p status)"
timeout 30 rm -rf "$M/D" || fail "rm -rf D with p out"
timeout 30 rmdir "$M/E" || fail "rmdir E (empty on s) with p out"
# a temp directory made and removed during the outage (mktemp -d; rm -rf)
T1=$(timeout 30 mktemp -d "$M/tmp.XXXXXX") || fail "mktemp -d with p out"
echo t >"$T1/t"
mkdir "$T1/sub"
timeout 30 rm -rf "$T1" || fail "rm -rf of a temp directory with p out"
[ ! -e "$T/s/D" ] && [ ! -e "$T/s/E" ] && [ ! -e "$T/s/${T1##*/}" ] ||
	fail "s still holds what was removed: $(cd "$T/s" && find .)"
echo "fault p off" >"$CTL"
repair_settled "$M" 30
# p's files the program never saw are there, with their directories
[ "$(cat "$M/D/one")" = one ] || fail "D/one after p came back: $(ls -la "$M/D" 2>&1)"
[ ! -e "$M/D/x" ] || fail "D/x is back after p came back"
[ "$(cat "$M/E/e")" = e ] || fail "E/e after p came back"
[ ! -e "$M/${T1##*/}" ] || fail "the temp directory is back after p came back"
ls -la "$M/D" >/dev/null || fail "ls D after p came back"
# with p up, D and E remove as on any disk
timeout 30 rm -rf "$M/D" "$M/E" || fail "rm -rf D E with p up"
[ ! -e "$T/p/D" ] && [ ! -e "$T/p/E" ] || fail "p still holds D or E: $(cd "$T/p" && find .)"

# round 2: p drained; a directory made during the outage is removed too
mkdir "$M/F"
echo f >"$M/F/f"
mkdir -p "$T/s/F"
timeout 20 sh -c "echo 'drain p' >'$CTL'" || fail "drain p"
timeout 30 rm -rf "$M/F" || fail "rm -rf F with p drained"
mkdir "$M/N"
echo n >"$M/N/n"
timeout 30 rm -rf "$M/N" || fail "rm -rf N (made while p was drained)"
timeout 20 sh -c "echo 'undrain p' >'$CTL'" || fail "undrain p"
repair_settled "$M" 30
[ "$(cat "$M/F/f")" = f ] || fail "F/f after the undrain"
[ ! -e "$M/N" ] || fail "N after the undrain: $(ls -la "$M/N" 2>&1)"
timeout 30 rm -rf "$M/F" || fail "rm -rf F with p up"
[ "$(stats "$M" .pendingHints)" = 0 ] || fail "hints pending at the end"
left=$(ls -A "$M" | grep -vx .smux || true)
[ -z "$left" ] || fail "the mount is not empty at the end: $left"
left=$(ls -A "$T/s" "$T/p" | grep -v "^\.smuxfs-tmp$\|^$\|:$" || true)
[ -z "$left" ] || fail "the members are not empty at the end: $left"
unmount_smux "$M"
