#!/usr/bin/env bash
# test_swift.sh - a shield mount (origin: a file backend; mirror: a swift
# backend on OpenStack Swift, tempauth) : cp -r, tar x, a 12 MiB file (a
# static large object of 4 segments there) read in the middle, chmod,
# rename and rm -r through the mount; afterwards the origin and the Swift
# container (read with python3-swiftclient's `swift download`) hold
# exactly the tree the mount shows; the large object renamed keeps its
# segments and removed leaves none. Then a tree that `swift upload` made
# (nested pseudo-directories, an empty directory, names with spaces and
# UTF-8, a static and a dynamic large object of 4 segments) lists and
# reads through a mount of one swift backend on its container.
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

# ---- objects uploaded by `swift upload`, read through a mount ----
# A tree uploaded by python3-swiftclient (nested pseudo-directories, an
# empty directory, which swift upload stores as an application/directory
# marker, names with spaces and UTF-8) and two segmented large objects:
# a static one (--use-slo; segments in <container>_segments, a manifest
# listing them) and a dynamic one (an X-Object-Manifest prefix). Mounted
# through one swift backend on that container: find and ls -lR show the
# names, types and sizes, and every file reads back byte for byte.
UC=${CONTAINER}-up
U=$T/up
mkdir -p "$U/d/sub/deeper" "$U/empty dir" "$U/ünï/cödé" "$U/big"
printf 'deep file\n' >"$U/d/sub/deeper/file"
head -c 70000 /dev/urandom >"$U/d/sub/mid.bin"
: >"$U/d/zero"
echo 'a file with spaces' >"$U/d/with space.txt"
echo 'unicode' >"$U/ünï/cödé/naïve façade.txt"
echo top >"$U/top.txt"
head -c $((3 * 1024 * 1024 + 17)) /dev/urandom >"$U/big/slo.bin"
head -c $((3 * 1000 * 1000 + 5)) /dev/urandom >"$U/big/dlo.bin"
(cd "$U" && "${SWIFT[@]}" upload "$UC" d "empty dir" "ünï" top.txt)
(cd "$U" && "${SWIFT[@]}" upload --use-slo --segment-size 1000000 \
	"$UC" big/slo.bin)
(cd "$U" && "${SWIFT[@]}" upload --segment-size 1000000 "$UC" big/dlo.bin)
# what swift upload made: a marker for the empty directory, an SLO
# manifest and a DLO manifest, 4 segments each
"${SWIFT[@]}" stat "$UC" "empty dir" | grep -q 'Content Type: application/directory' ||
	fail "swift upload made no directory marker for the empty directory"
"${SWIFT[@]}" stat "$UC" big/slo.bin | grep -q 'Manifest: ' &&
	fail "big/slo.bin is a DLO, not an SLO"
"${SWIFT[@]}" stat "$UC" big/slo.bin >"$T/slo.stat"
grep -qi 'X-Static-Large-Object: True' "$T/slo.stat" ||
	{ cat "$T/slo.stat" >&2; fail "big/slo.bin is not a static large object"; }
"${SWIFT[@]}" stat "$UC" big/dlo.bin | grep -q 'Manifest: ' ||
	fail "big/dlo.bin is not a dynamic large object"
n=$("${SWIFT[@]}" list "${UC}_segments" | wc -l)
[ "$n" -eq 8 ] || fail "swift upload made $n segments, not 8"

UCONF=$T/upload.conf
new_config "$UCONF" up
cfg_raw "[backend up]
type = swift
auth_url = $SWIFT_AUTH_URL
container = $UC
credentials_env = SMUX_IT_SWIFT_CRED
"
UM=$T/umnt
mount_smux "$UCONF" "$UM"
# type and name of every entry, the size of every file
tree_of() {
	(cd "$1" && find . -mindepth 1 -path ./.smux -prune -o \
		\( -type f -printf 'f %s %P\n' \) -o \( -type d -printf 'd %P\n' \) \
		-o -printf '? %P\n') | sort
}
tree_of "$U" >"$T/up.want"
tree_of "$UM" >"$T/up.got"
diff "$T/up.want" "$T/up.got" || fail "the mount shows another tree than swift upload's"
ls -lR "$UM" >"$T/up.ls"
for n in deeper file "with space.txt" "naïve façade.txt" "empty dir" \
	slo.bin dlo.bin; do
	grep -qF " $n" "$T/up.ls" || fail "ls -lR does not show $n"
done
grep -q "^d.* empty dir\$" "$T/up.ls" || fail "ls -l: empty dir is not a directory"
grep -q " $((3 * 1024 * 1024 + 17)) .* slo.bin\$" "$T/up.ls" ||
	fail "ls -l size of the SLO"
grep -q " $((3 * 1000 * 1000 + 5)) .* dlo.bin\$" "$T/up.ls" ||
	fail "ls -l size of the DLO"
[ -z "$(ls -A "$UM/empty dir")" ] || fail "empty dir is not empty"
while IFS= read -r f; do
	cmp "$U/$f" "$UM/$f" || fail "$f read through the mount differs"
done < <(cd "$U" && find . -type f -printf '%P\n')
# a range of the SLO across the boundary of its first two segments
cmp <(dd if="$U/big/slo.bin" bs=1000 skip=999 count=2 2>/dev/null) \
	<(dd if="$UM/big/slo.bin" bs=1000 skip=999 count=2 2>/dev/null)
log "swift upload's tree ($(wc -l <"$T/up.want") entries), SLO and DLO list and read through the mount"
unmount_smux "$UM"
stop_net_servers
log "passed"
