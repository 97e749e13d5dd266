#!/usr/bin/env bash
# test_dotnames_mirror.sh - a mirror [file, nginx WebDAV] while the file
# replica, the one whose listings show names starting with '.', is out
# (drained): listings come from nginx alone, which hides them (found by an
# outside tester, s39-t3, on a mirror [s3, webdav] with S3 stopped).
#   - rm -r of a directory holding a .hidden: it removed what it listed
#     and the directory, and the replay on the other replica left the
#     .hidden there, so the directory came back with it. Now the removal
#     of the directory is refused (ENOTEMPTY), nothing of it lost.
#   - mv of such a directory (key by key: a replica is out): the files
#     it listed moved, then the old directory would not go. Now all of
#     it goes back, and the directory keeps every name.
# Once the replica is back, rm -r removes everything, on both replicas.
. "$(dirname "$0")/lib.sh"

start_nginx_dav "$T/ng"
new_config "$T/c.conf" root
cfg_mux root mirror "f d"
cfg_file f "$T/f"
cfg_raw "[backend d]
type = http
url = $DAV_URL/
"
M=$T/mnt
mount_smux "$T/c.conf" "$M"
CTL=$M/.smux/ctl
DAV=$T/ng/root

for dir in d m; do
	mkdir "$M/$dir"
	echo secret >"$M/$dir/.hidden"
	echo seen >"$M/$dir/visible"
done
timeout 20 sh -c "echo 'drain f' >'$CTL'" || fail "drain f"

rc=0
timeout 60 rm -r "$M/d" 2>"$T/rm.err" || rc=$?
log "rm -r d while f is drained: rc $rc ($(cat "$T/rm.err"))"
[ "$rc" != 0 ] || fail "rm -r d succeeded while no replica listing dot names was up"
[ "$(cat "$M/d/.hidden")" = secret ] || fail "d/.hidden is gone through the mount"

rc=0
timeout 60 mv "$M/m" "$M/m2" 2>"$T/mv.err" || rc=$?
log "mv m m2 while f is drained: rc $rc ($(cat "$T/mv.err"))"
[ "$rc" != 0 ] || fail "mv m m2 succeeded while no replica listing dot names was up"
[ "$(cat "$M/m/visible")" = seen ] || fail "m/visible did not go back"
[ "$(cat "$M/m/.hidden")" = secret ] || fail "m/.hidden is gone"
[ ! -e "$M/m2/visible" ] || fail "m2/visible is still there"

timeout 20 sh -c "echo 'undrain f' >'$CTL'" || fail "undrain f"
repair_settled "$M" 60
for r in "$T/f" "$DAV"; do
	[ "$(cat "$r/d/.hidden")" = secret ] || fail "$r: d/.hidden lost"
	[ "$(cat "$r/m/.hidden")" = secret ] && [ "$(cat "$r/m/visible")" = seen ] ||
		fail "$r: m lost a name: $(ls -A "$r/m" | tr '\n' ' ')"
	[ ! -e "$r/m2" ] || [ -z "$(ls -A "$r/m2")" ] ||
		fail "$r: m2 holds $(ls -A "$r/m2" | tr '\n' ' ')"
done

timeout 60 rm -r "$M/d" "$M/m" || fail "rm -r with both replicas up"
rm -rf "$M/m2"
repair_settled "$M" 60
for r in "$T/f" "$DAV"; do
	[ ! -e "$r/d" ] && [ ! -e "$r/m" ] ||
		fail "$r still holds: $(find "$r" -mindepth 1 | tr '\n' ' ')"
done
unmount_smux "$M"
