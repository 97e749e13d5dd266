#!/usr/bin/env bash
# test_dirnames_outage.sh - a directory's names are known (dirnames.c)
# only from a listing of the whole tree: a sticky-by-key mux over two
# Bunny emulators, one shard stopped. Its listing then lacks the stopped
# shard's keys; were it taken as the directory's names, a lookup of such
# a key would answer "no such file" (and O_EXCL would create over it)
# where the shard's own answer is an error.
. "$(dirname "$0")/lib.sh"

start_bunny_emu "$T/b1" z1 k1
URL1=$BUNNY_URL
start_bunny_emu "$T/b2" z2 k2
URL2=$BUNNY_URL
PID2=$BUNNY_PID

CONF=$T/sticky.conf
new_config "$CONF" m entry_timeout=0 negative_timeout=0 attr_timeout=0 \
	dir_cache_timeout=1h
cfg_mux m sticky-by-key "s1 s2" backend_timeout=2s cooldown=1h max_cooldown=1h
cfg_raw "[backend s1]
type = bunny
zone = z1
region = uk
endpoint = $URL1
credentials_file = $T/b1/key

[backend s2]
type = bunny
zone = z2
region = uk
endpoint = $URL2
credentials_file = $T/b2/key
"
M=$T/mnt
mount_smux "$CONF" "$M"
mkdir "$M/d"
for i in $(seq 1 20); do printf 'v%d\n' "$i" >"$M/d/f$i"; done
# the keys the second shard holds
on2=()
for i in $(seq 1 20); do
	[ -e "$T/b2/store/z2/d/f$i" ] && on2+=("f$i")
done
[ ${#on2[@]} -gt 0 ] || fail "no key on the second shard"
log "${#on2[@]} of 20 keys on s2"

# s2 stops answering (a connection refused: the emulator is gone)
kill -TERM "$PID2"
wait "$PID2" 2>/dev/null || true
# a call on one of its keys marks it down
cat "$M/d/${on2[0]}" >/dev/null 2>&1 || true
# listed while s2 is down: the listing has s1's keys only
ls "$M/d" >"$T/ls" 2>&1 || true
for k in "${on2[@]}"; do
	out=$(stat "$M/d/$k" 2>&1) && continue
	case $out in
	*"No such file"*) fail "d/$k (on the stopped shard) answered 'no such file' after a partial listing" ;;
	esac
done
if (set -o noclobber && printf 'new\n' >"$M/d/${on2[0]}") 2>/dev/null; then
	fail "O_EXCL created d/${on2[0]} over the stopped shard's copy"
fi
log "keys of a stopped shard are not 'no such file' after a partial listing"
unmount_smux "$M"
