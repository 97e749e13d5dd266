#!/usr/bin/env bash
# test_links.sh SETUP - symlinks, FIFOs and copies of trees holding them,
# on a mount of SETUP: "file" (one file backend), "mirror" (two file
# backends), "failover" (two file backends) or "memory":
#   - ln -s (relative, absolute, dangling, one climbing out of the mount),
#     readlink, readlink -f, find -type l, ls -l, stat, touch -h, mv, rm:
#     as on ext4, and every replica holds real symlinks with the same
#     target (the daemon stores the text, never follows it);
#   - mkfifo: a FIFO on each replica; a writer and a reader meet through
#     the mount; mknod of a device stays refused;
#   - memory (an object store): the same for symlinks and FIFOs; ln is
#     EPERM with the reason logged;
#   - ln (hard links): nlink 2 through the mount and on each replica (one
#     inode there), a link to a symlink, rm of one name keeps the other;
#     a write through one name read through the other (writes land in
#     place: the name keeps its inode);
#   - mv of a directory: one rename(2) per replica (the files keep their
#     inodes), an open reader and an open appender carry on under the new
#     name; onto a non-empty directory refused, onto an empty one replaced;
#   - cp -a and rsync -H of a tree with symlinks, hard links, a FIFO and
#     odd modes (0600, 0751, 0444): then rsync -n --itemize-changes prints
#     nothing, diff -r agrees, through the mount and on each replica, and
#     the hard links are links on each replica.
# Owners (files, directories, symlinks, FIFOs) are copied by cp -a and
# rsync -aH as root and compared with the source's.
. "$(dirname "$0")/lib.sh"

SETUP=${1:?usage: test_links.sh file|mirror|failover|memory}
M=$T/mnt
S=$T/src
CONF=$T/links.conf

tree_config "$SETUP" "$CONF"
mount_smux "$CONF" "$M"

# expect WHAT GOT WANT
expect() { [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"; }

# ---- symlinks ----
echo hello >"$M/target.txt"
mkdir "$M/d"
ln -s target.txt "$M/rel"
ln -s /etc/hostname "$M/abs"
ln -s nowhere "$M/dangling"
ln -s ../../../../../../../etc/passwd "$M/d/climb"
ln -s ../target.txt "$M/d/up"

expect "readlink rel" "$(readlink "$M/rel")" target.txt
expect "readlink abs" "$(readlink "$M/abs")" /etc/hostname
expect "readlink dangling" "$(readlink "$M/dangling")" nowhere
expect "readlink climb" "$(readlink "$M/d/climb")" ../../../../../../../etc/passwd
expect "readlink -f rel" "$(readlink -f "$M/rel")" "$M/target.txt"
expect "readlink -f d/up" "$(readlink -f "$M/d/up")" "$M/target.txt"
expect "cat through rel" "$(cat "$M/rel")" hello
expect "cat through d/up" "$(cat "$M/d/up")" hello
[ -L "$M/dangling" ] || fail "dangling is no symlink"
[ ! -e "$M/dangling" ] || fail "dangling resolves"
# the kernel resolves the climbing link in the mount's namespace
expect "cat through climb" "$(head -c 5 "$M/d/climb")" "$(head -c 5 /etc/passwd)"
expect "find -type l" "$(cd "$M" && find . -type l | sort | tr '\n' ' ')" \
	"./abs ./d/climb ./d/up ./dangling ./rel "
expect "find -type f" "$(cd "$M" && find . -path ./.smux -prune -o -type f -print | sort | tr '\n' ' ')" "./target.txt "
ls_rel=$(ls -l "$M/rel")
case $ls_rel in
l*" $M/rel -> target.txt") ;;
*) fail "ls -l rel: $ls_rel" ;;
esac
expect "lstat size" "$(stat -c '%s %F' "$M/rel")" "10 symbolic link"
expect "stat follows" "$(stat -L -c '%s %F' "$M/rel")" "6 regular file"
ls -l "$M" "$M/d" >"$T/ls.out"
grep -q '^l.* dangling -> nowhere$' "$T/ls.out" || fail "ls -l lists no dangling link"
touch -h -d @1500000000 "$M/abs"
expect "touch -h" "$(stat -c %Y "$M/abs")" 1500000000
for r in $REPLICAS; do
	for l in rel abs dangling d/climb d/up; do
		[ -L "$r/$l" ] || fail "$r/$l is no symlink"
		expect "$r/$l target" "$(readlink "$r/$l")" "$(readlink "$M/$l")"
	done
	expect "$r/abs mtime" "$(stat -c %Y "$r/abs")" 1500000000
	expect "$r/target.txt" "$(cat "$r/target.txt")" hello
done
mv "$M/rel" "$M/d/moved"
[ ! -L "$M/rel" ] || fail "rel still there after mv"
expect "readlink moved" "$(readlink "$M/d/moved")" target.txt
rm "$M/d/moved" "$M/dangling"
for r in $REPLICAS; do
	for l in rel d/moved dangling; do
		[ ! -L "$r/$l" ] || fail "$r keeps the removed link $l"
	done
	[ -f "$r/target.txt" ] || fail "rm of a link removed its target on $r"
done
# replacing a link by rename replaces the link, not its target
ln -s target.txt "$M/rel"
echo other >"$M/other.txt"
mv "$M/other.txt" "$M/rel"
[ ! -L "$M/rel" ] || fail "rel is still a link after mv over it"
expect "target kept" "$(cat "$M/target.txt")" hello
ln -s target.txt "$M/rel2"
if ln -s x "$M/rel2" 2>/dev/null; then fail "ln -s over an existing link succeeded"; fi

# ---- FIFOs and devices ----
mkfifo -m 0640 "$M/fifo"
[ -p "$M/fifo" ] || fail "fifo is no FIFO through the mount"
expect "fifo mode" "$(stat -c %a "$M/fifo")" 640
for r in $REPLICAS; do
	[ -p "$r/fifo" ] || fail "$r/fifo is no FIFO"
done
(echo through-the-fifo >"$M/fifo") &
writer=$!
expect "fifo read" "$(timeout 10 cat "$M/fifo")" through-the-fifo
wait "$writer"
if mknod "$M/dev" c 1 3 2>/dev/null; then fail "mknod of a device succeeded"; fi
[ ! -e "$M/dev" ] || fail "a device appeared"

# ---- hard links ----
if [ "$SETUP" = memory ]; then
	echo first >"$M/h1"
	out=$(ln "$M/h1" "$M/h2" 2>&1) && fail "ln on a memory backend succeeded"
	case $out in
	*"Operation not permitted"*) ;;
	*) fail "ln on a memory backend: $out" ;;
	esac
	grep -q "hard links need every backend of the tree to be a file backend" "$T"/smuxfs.*.log ||
		fail "no logged reason for the refused hard link"
	unmount_smux "$M"
	log "ok"
	exit 0
fi
echo first >"$M/h1"
ln "$M/h1" "$M/d/h2"
expect "nlink of the new name" "$(stat -c %h "$M/d/h2")" 2
expect "nlink of the old name" "$(stat -c %h "$M/h1")" 2
expect "content via the new name" "$(cat "$M/d/h2")" first
expect "one inode number through the mount" "$(stat -c %i "$M/h1")" "$(stat -c %i "$M/d/h2")"
for r in $REPLICAS; do
	expect "$r/h1 nlink" "$(stat -c %h "$r/h1")" 2
	expect "$r one inode" "$(stat -c %i "$r/h1")" "$(stat -c %i "$r/d/h2")"
done
if ln "$M/h1" "$M/d/h2" 2>/dev/null; then fail "ln over an existing name succeeded"; fi
if ln "$M/d" "$M/dlink" 2>/dev/null; then fail "ln of a directory succeeded"; fi
ln "$M/d/up" "$M/uplink" # a hard link to a symlink is a symlink
expect "readlink of a linked symlink" "$(readlink "$M/uplink")" ../target.txt
# A write through one name shows through the other at once (writes land
# in the file itself: the name keeps its inode on every replica). The
# other name is another node to the kernel (one inode number, two kernel
# inodes), whose attributes the daemon lets it cache for 0 s while the
# file has several names.
ino=$(stat -c %i "$T/b0/h1")
echo more >>"$M/h1"
expect "the written name keeps its inode" "$(stat -c %i "$T/b0/h1")" "$ino"
want="first
more"
expect "a write through one name, read through the other" \
	"$(cat "$M/d/h2")" "$want"
for r in $REPLICAS; do
	expect "$r/d/h2 after the write" "$(cat "$r/d/h2")" "$want"
done
# Two programs appending at once, one through each name: every replica
# holds the lines in one order (each name's writer fanned its appends
# out on its own, and two mirror replicas ended with the same 4000 lines
# in different orders).
ln "$M/h1" "$M/h3"
python3 - "$M/h1" "$M/h3" <<'PY' || fail "the appenders through two names"
import os, sys, threading
def run(path, tag):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    for i in range(1000):
        os.write(fd, b"%s %04d\n" % (tag, i))
    os.close(fd)
ts = [threading.Thread(target=run, args=(p, t)) for p, t in
      ((sys.argv[1], b"one"), (sys.argv[2], b"two"))]
for t in ts: t.start()
for t in ts: t.join()
PY
rm "$M/h3"
[ "$(grep -c '^one ' "$M/h1")" = 1000 ] && [ "$(grep -c '^two ' "$M/h1")" = 1000 ] ||
	fail "appends through two names: $(grep -c . "$M/h1") lines"
for r in $REPLICAS; do
	cmp -s "$T/b0/h1" "$r/h1" || fail "$r/h1 differs from b0/h1 after appends through two names"
done
head -2 "$M/h1" >"$T/h1.keep"
cp "$T/h1.keep" "$M/h1"
want=$(cat "$T/h1.keep")
rm "$M/h1"
expect "the other name stays" "$(cat "$M/d/h2")" "$want"
for r in $REPLICAS; do
	expect "$r/d/h2 nlink after rm" "$(stat -c %h "$r/d/h2")" 1
done

# ---- directory rename: one rename(2) per replica ----
mkdir -p "$M/dr/sub"
echo in-dir >"$M/dr/sub/f"
ln -s f "$M/dr/sub/l"
declare -A ino
for r in $REPLICAS; do ino[$r]=$(stat -c %i "$r/dr/sub"); done
exec 3<"$M/dr/sub/f"
exec 4>>"$M/dr/w"
echo before >&4
mv "$M/dr" "$M/dr2"
echo after >&4
exec 4>&-
expect "reader across the rename" "$(cat <&3)" in-dir
exec 3<&-
[ ! -e "$M/dr" ] || fail "dr still there after mv"
expect "content after mv" "$(cat "$M/dr2/sub/f")" in-dir
expect "link after mv" "$(readlink "$M/dr2/sub/l")" f
expect "writer across the rename" "$(cat "$M/dr2/w")" "before
after"
for r in $REPLICAS; do
	# the same directory inode: the tree moved with one rename(2), not
	# made anew key by key
	expect "$r/dr2/sub inode" "$(stat -c %i "$r/dr2/sub")" "${ino[$r]}"
	[ ! -e "$r/dr" ] || fail "$r/dr still there"
	[ -L "$r/dr2/sub/l" ] || fail "$r/dr2/sub/l is no symlink"
	expect "$r/dr2/w" "$(cat "$r/dr2/w")" "before
after"
done
mkdir -p "$M/full/x"
if mv -T "$M/dr2" "$M/full" 2>/dev/null; then fail "mv onto a non-empty directory succeeded"; fi
mkdir "$M/empty"
mv -T "$M/dr2" "$M/empty"
expect "mv onto an empty directory" "$(cat "$M/empty/sub/f")" in-dir

# ---- cp -a and rsync of a tree ----
mkdir -p "$S/a/b" "$S/x"
printf 'one\n' >"$S/a/one"
printf 'secret\n' >"$S/a/b/private"
chmod 0600 "$S/a/b/private"
printf 'ro\n' >"$S/readonly"
chmod 0444 "$S/readonly"
printf '#!/bin/sh\n' >"$S/x/tool"
chmod 0751 "$S/x/tool"
chmod 0751 "$S/x"
ln -s a/one "$S/link-one"
ln -s ../missing "$S/a/dangling"
ln -s ../../readonly "$S/a/b/up"
mkfifo -m 0600 "$S/a/fifo"
ln "$S/a/one" "$S/x/one-again"
touch -h -d @1400000000 "$S/link-one"
touch -d @1300000000 "$S/a/one"
# owners other than root's, on a file, a directory, a symlink and a FIFO
chown 1234:5678 "$S/a/one" "$S/x"
chown -h 4321:8765 "$S/link-one"
chown 2345:2345 "$S/a/fifo"

# compare_tree DIR: the tree at DIR is the source's
compare_tree() {
	local dir=$1 out
	diff -r --no-dereference -x fifo "$S" "$dir" || fail "diff -r $S $dir"
	[ -p "$dir/a/fifo" ] || fail "$dir/a/fifo is no FIFO"
	# -H: two names of one file show one inode number, through the
	# mount as on the replicas
	out=$(rsync -nrlptDogH --itemize-changes "$S/" "$dir/")
	[ -z "$out" ] || fail "rsync -n to $dir wants changes: $out"
	expect "$dir owners" "$(cd "$dir" && stat -c '%u:%g %n' a/one x link-one a/fifo)" \
		"$(cd "$S" && stat -c '%u:%g %n' a/one x link-one a/fifo)"
	expect "$dir modes" "$(cd "$dir" && stat -c '%a %n' readonly x x/tool a/b/private a/fifo)" \
		"444 readonly
751 x
751 x/tool
600 a/b/private
600 a/fifo"
	expect "$dir hard link" "$(stat -c %h "$dir/a/one" "$dir/x/one-again" | tr '\n' ' ')" "2 2 "
	expect "$dir one inode" "$(stat -c %i "$dir/a/one")" "$(stat -c %i "$dir/x/one-again")"
}

cp -a "$S" "$M/cp"
compare_tree "$M/cp"
rsync -aH "$S/" "$M/rs/"
compare_tree "$M/rs"
for r in $REPLICAS; do
	compare_tree "$r/cp"
	compare_tree "$r/rs"
done
# an update round: rsync replaces a changed link and file in place
ln -sfn a/b/private "$S/link-one"
printf 'two\n' >>"$S/a/one"
rsync -aH "$S/" "$M/rs/"
compare_tree "$M/rs"

# ---- a fresh daemon shows the same tree ----
unmount_smux "$M"
mount_smux "$CONF" "$M"
compare_tree "$M/rs"
expect "readlink after remount" "$(readlink "$M/d/climb")" ../../../../../../../etc/passwd
[ -p "$M/fifo" ] || fail "fifo lost at remount"

# Two files of two names each swapped behind the mount on a single
# backend: each name shows its file's own inode number. One kept from
# before (s41 review) named two files alike, and tar -c made one a hard
# link of the other.
if [ "$SETUP" = file ]; then
	mkdir "$M/sw"
	printf 'XXXX' >"$M/sw/x"
	ln "$M/sw/x" "$M/sw/xl"
	printf 'YYYY' >"$M/sw/y"
	ln "$M/sw/y" "$M/sw/yl"
	stat -c %i "$M/sw/x" "$M/sw/xl" "$M/sw/y" "$M/sw/yl" >/dev/null
	(cd "$T/b0/sw" && mv x tmp && mv y x && mv tmp y)
	sleep 1.2 # past the kernel's entry and attribute times
	[ "$(stat -c %i "$M/sw/x")" = "$(stat -c %i "$M/sw/yl")" ] &&
		[ "$(stat -c %i "$M/sw/x")" != "$(stat -c %i "$M/sw/xl")" ] ||
		fail "inode numbers after a swap behind the mount: x $(stat -c %i "$M/sw/x") xl $(stat -c %i "$M/sw/xl") yl $(stat -c %i "$M/sw/yl")"
fi
unmount_smux "$M"
log "ok"
