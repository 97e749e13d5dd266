#!/usr/bin/env bash
# test_swift.sh - a shield mount (origin: a file backend; mirror: a swift
# backend on OpenStack Swift, tempauth) : cp -r, tar x, a 12 MiB file (a
# static large object of 4 segments there) read in the middle, chmod,
# rename and rm -r through the mount; afterwards the origin and the Swift
# container (read with python3-swiftclient's `swift download`) hold
# exactly the tree the mount shows; the large object renamed keeps its
# segments and removed leaves none.
#
# Swift takes seconds to minutes to start on a busy machine: `make check`
# starts one for all its passes (tests/servers/shared.sh), which
# SMUX_TEST_SWIFT_DIR names; else lib.sh's use_swift starts one for this
# test.
. "$(dirname "$0")/lib.sh"

use_swift
CONTAINER=$SWIFT_CONTAINER

CONF=$T/swift.conf
new_config "$CONF" m
cfg_mux m shield "origin s" backend_timeout=30s
cfg_file origin "$T/origin"
cfg_raw "[backend s]
type = swift
auth_url = $SWIFT_AUTH_URL
container = $CONTAINER
credentials_env = SMUX_IT_SWIFT_CRED
segment_threshold = 4M
segment_size = 3M
"
M=$T/mnt
mount_smux "$CONF" "$M"

S=$T/src
make_tree "$S" 2 4
cp -r "$S" "$M/copy"
(cd "$S" && tar cf "$T/t.tar" .)
mkdir "$M/untar"
tar xf "$T/t.tar" -C "$M/untar"
diff -r "$S" "$M/copy"
diff -r "$S" "$M/untar"
log "cp -r and tar x through the mount match the source"

head -c $((12 * 1024 * 1024)) /dev/urandom >"$T/big"
cp "$T/big" "$M/big"
cmp "$T/big" "$M/big"
cmp <(dd if="$T/big" bs=1M skip=5 count=3 2>/dev/null) \
	<(dd if="$M/big" bs=1M skip=5 count=3 2>/dev/null)
# above segment_threshold: a static large object of 4 segments
segs() { "${SWIFT[@]}" list "${CONTAINER}_segments" 2>/dev/null | wc -l; }
# the count wanted; Swift's listing may lag its writes on a loaded
# machine: polled for up to 20 s
want_segs() {
	local i
	for ((i = 0; i < 40; i++)); do
		[ "$(segs)" = "$1" ] && return 0
		sleep 0.5
	done
	fail "$2: $(segs) segments, not $1"
}
want_segs 4 "big"

chmod 600 "$M/copy/d0/f0.dat"
[ "$(stat -c %a "$M/copy/d0/f0.dat")" = 600 ] || fail "chmod not kept"
mv "$M/copy/d1/f3.dat" "$M/copy/d1/moved.dat"
cmp "$S/d1/f3.dat" "$M/copy/d1/moved.dat"
[ ! -e "$M/copy/d1/f3.dat" ] || fail "renamed file still there"
rm -r "$M/untar"
[ ! -e "$M/untar" ] || fail "rm -r left untar"

snap=$T/snap
mkdir "$snap"
(cd "$M" && tar cf - --exclude=./.smux .) | tar xf - -C "$snap"
diff -r -x .smuxfs-tmp "$snap" "$T/origin"
# the Swift replica, byte for byte, read by swiftclient (empty
# directories are markers there: compare the files)
mkdir "$T/dl"
(cd "$T/dl" && "${SWIFT[@]}" download "$CONTAINER")
(cd "$snap" && find . -type f | sort) >"$T/files.mount"
while read -r f; do
	cmp "$snap/$f" "$T/dl/$f" || fail "swift holds another $f"
done <"$T/files.mount"
log "the origin and the Swift container both match the mount"

unmount_smux "$M"
mount_smux "$CONF" "$M"
(cd "$M" && tar cf - --exclude=./.smux .) | tar tf - | sort >"$T/after"
(cd "$snap" && tar cf - .) | tar tf - | sort >"$T/before"
diff "$T/before" "$T/after"
# the large object renamed keeps its segments, removed takes them along
mv "$M/big" "$M/big2"
cmp "$T/big" "$M/big2"
want_segs 4 "after mv"
rm "$M/big2"
want_segs 0 "after rm"
log "a large object: 4 segments, renamed, removed with its segments"
unmount_smux "$M"
stop_net_servers
log "passed"
