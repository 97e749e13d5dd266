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
# both names on d, and there is no m2.
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
unmount_smux "$M"
