#!/usr/bin/env bash
# test_dotnames_rename.sh - a directory rename moved key by key whose old
# directory would not go puts everything back (review of session 39).
#
# failover [d (nginx WebDAV), f, g (file backends)], f and the tree on d
# kept in sync by other means (both hold m/visible and m/.hidden), g
# drained: `mv m m2` cannot be one call per member (g is not up), so it
# moves key by key from d's listing, which hides names starting with '.'.
# m/visible moved; then the removal of m is refused (f, up and listing
# dot names, still holds m/.hidden and m/visible: nginx's recursive
# DELETE would have taken the .hidden). Before, mv failed with ENOTEMPTY
# and left m/visible under m2. Now mv fails with nothing moved: m holds
# both names on d, and there is no m2. Then a directory without dot names
# (n) renames, f's copy of its names no reason to refuse.
. "$(dirname "$0")/lib.sh"

start_nginx_dav "$T/ng"
DAV=$T/ng/root
mkdir -p "$DAV/m" "$T/f/m" "$T/g"
for r in "$DAV" "$T/f"; do
	echo secret >"$r/m/.hidden"
	echo seen >"$r/m/visible"
done
new_config "$T/c.conf" root
cfg_mux root failover "d f g"
cfg_raw "[backend d]
type = http
url = $DAV_URL/
"
cfg_file f "$T/f"
cfg_file g "$T/g"
M=$T/mnt
mount_smux "$T/c.conf" "$M"
timeout 20 sh -c "echo 'drain g' >'$M/.smux/ctl'" || fail "drain g"

rc=0
timeout 60 mv "$M/m" "$M/m2" 2>"$T/mv.err" || rc=$?
log "mv m m2: rc $rc ($(cat "$T/mv.err"))"
[ "$rc" != 0 ] || fail "mv m m2 succeeded: nginx's copy of m/.hidden would be gone"
[ "$(cat "$DAV/m/visible" 2>&1)" = seen ] ||
	fail "m/visible did not go back on d: $(ls -A "$DAV/m" "$DAV/m2" 2>&1 | tr '\n' ' ')"
[ "$(cat "$DAV/m/.hidden" 2>&1)" = secret ] || fail "m/.hidden is gone on d"
[ ! -e "$DAV/m2" ] || fail "m2 is left on d: $(ls -A "$DAV/m2" | tr '\n' ' ')"
[ "$(cat "$M/m/visible")" = seen ] || fail "m/visible through the mount"

# A directory without dot names, on d and f (f: a failover standby's copy
# of what d holds): `mv n n2` moves it key by key on d, and f's listing
# (its own copy of n/visible, which was in d's listing and moved) is no
# reason to refuse the removal of n (s42-t1: ENOTEMPTY on a failover of
# WebDAV and s3, 100%).
for r in "$DAV" "$T/f"; do
	mkdir -p "$r/n"
	echo seen >"$r/n/visible"
done
timeout 60 mv "$M/n" "$M/n2" 2>"$T/mv.err" || fail "mv n n2: $(cat "$T/mv.err")"
[ "$(cat "$M/n2/visible")" = seen ] || fail "n2/visible through the mount"
[ ! -e "$M/n" ] || fail "n is still there"
[ "$(cat "$DAV/n2/visible" 2>&1)" = seen ] || fail "n2/visible on d"
log "a directory without dot names renamed key by key: done, f's standby copy no reason to refuse"
unmount_smux "$M"
