#!/usr/bin/env bash
# test_undrain_setattr.sh - a chmod or touch right after the undrain of a
# shield's origin (found by an outside tester, s44-t4): files and
# directories written while the origin was drained have a hint for it,
# and a setattr that came before its replay left the origin out as stale
# - and a shield fails a change its origin does not take: EIO, in about 1
# of 4 tries (a git clone during a rolling drain died on the chmod of an
# object file). A change that builds on a key now replays it first for a
# replica that is up.
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" m
cfg_mux m shield "r1 r2"
cfg_file r1 "$T/r1"
cfg_file r2 "$T/r2"
M=$T/mnt
CTL=$M/.smux/ctl
mount_smux "$T/c.conf" "$M"

fails=0
for ((i = 1; i <= 30; i++)); do
	timeout 10 sh -c "echo 'drain r1' >'$CTL'" || fail "drain r1"
	mkdir -p "$M/d$i"
	echo "data$i" >"$M/d$i/f"
	timeout 10 sh -c "echo 'undrain r1' >'$CTL'" || fail "undrain r1"
	timeout 10 chmod 444 "$M/d$i/f" 2>>"$T/errs" || fails=$((fails + 1))
	timeout 10 touch -d @1000000 "$M/d$i" 2>>"$T/errs" || fails=$((fails + 1))
done
[ "$fails" = 0 ] || fail "$fails of 60 chmod/touch failed right after the undrain: $(head -2 "$T/errs")"
repair_settled "$M" 30
for ((i = 1; i <= 30; i++)); do
	[ "$(stat -c %a "$T/r1/d$i/f")" = 444 ] || fail "d$i/f on r1: mode $(stat -c %a "$T/r1/d$i/f")"
	[ "$(stat -c %Y "$T/r1/d$i")" = 1000000 ] || fail "d$i on r1: mtime $(stat -c %Y "$T/r1/d$i")"
done
unmount_smux "$M"
