#!/usr/bin/env bash
# test_link_crossdir.sh - a mirror of two file backends [a, b]: a file
# whose names are in different directories (ln d/a e/b, as cp -al, rsync
# -H and git's local clone make them) stays one file on every replica
# through the replays of what a drained replica missed, also after a
# rename of a name and a restart of the daemon (the mux's link book,
# <state_dir>/m.links). Before: the replay of d/a gave b's d/a a file of
# its own; b's e/b kept the old bytes, and later writes through e/b no
# longer reached d/a there (s47-t1: with a drained, the mount showed
# e/b without the append).
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" m
cfg_mux m mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
M=$T/mnt
CTL=$M/.smux/ctl
mount_smux "$T/c.conf" "$M"

# one_file N1 N2 WANT MODE: on each replica N1 and N2 are one file
# holding WANT, of MODE
one_file() {
	local r got
	for r in a b; do
		[ "$(stat -c %i "$T/$r/$1")" = "$(stat -c %i "$T/$r/$2")" ] ||
			fail "$r: $1 and $2 are two files ($(stat -c '%n %i %h' \
				"$T/$r/$1" "$T/$r/$2" | tr '\n' ' '))"
		got=$(cat "$T/$r/$2")
		[ "$got" = "$3" ] || fail "$r: $2 holds '$got', not '$3'"
		[ "$(stat -c %a "$T/$r/$1")" = "$4" ] ||
			fail "$r: $1 mode $(stat -c %a "$T/$r/$1"), not $4"
	done
}

mkdir "$M/d" "$M/e" "$M/f" "$M/g"
echo start >"$M/d/a"
ln "$M/d/a" "$M/e/b"

# b misses an append and a chmod through d/a
echo "drain b" >"$CTL"
echo appended >>"$M/d/a"
chmod 640 "$M/d/a"
echo "undrain b" >"$CTL"
repair_settled "$M" 30
one_file d/a e/b "$(printf 'start\nappended')" 640
# with a out, b answers: e/b shows what was written through d/a
echo "drain a" >"$CTL"
got=$(timeout 10 cat "$M/e/b")
[ "$got" = "$(printf 'start\nappended')" ] || fail "a drained: e/b '$got'"
# and a write through e/b reaches d/a (b's one file)
echo third >>"$M/e/b"
echo "undrain a" >"$CTL"
repair_settled "$M" 30
one_file d/a e/b "$(printf 'start\nappended\nthird')" 640
log "d/a, e/b: one file on a and b after b's replays"

# mv e/b f/c, then b misses an append; the daemon restarts before the
# replay: the book (a file in the state directory) still names f/c
mv "$M/e/b" "$M/f/c"
echo "drain b" >"$CTL"
echo fourth >>"$M/d/a"
unmount_smux "$M"
[ -s "$T/state/c/m.links" ] || fail "no link book in $T/state/c"
mount_smux "$T/c.conf" "$M"
echo "undrain b" >"$CTL" 2>/dev/null || true
repair_settled "$M" 30
one_file d/a f/c "$(printf 'start\nappended\nthird\nfourth')" 640
log "d/a, f/c (renamed): one file after a restart and b's replay"

# b misses a link (ln d/a g/h) and the daemon restarts: the replay links
# g/h to d/a on b (before: a copy, the link memo being in memory only)
echo "drain b" >"$CTL"
ln "$M/d/a" "$M/g/h"
unmount_smux "$M"
mount_smux "$T/c.conf" "$M"
echo "undrain b" >"$CTL" 2>/dev/null || true
repair_settled "$M" 30
one_file d/a g/h "$(printf 'start\nappended\nthird\nfourth')" 640
[ "$(stat -c %h "$T/b/d/a")" = 3 ] ||
	fail "b: d/a has $(stat -c %h "$T/b/d/a") names, not 3"
log "g/h, linked while b was out: a link of d/a on b after a restart"

# b misses a new name of a file of two names and an append through it
# (ln n/a n/c; echo >> n/c): the replay writes the bytes into b's file
# of n/a and o/b, whose names are all the file's, and links n/c to it
# (before: n/c a file of its own on b, n/a and o/b there without the
# append, s48-t1)
mkdir "$M/n" "$M/o"
echo start >"$M/n/a"
ln "$M/n/a" "$M/o/b"
echo "drain b" >"$CTL"
ln "$M/n/a" "$M/n/c"
echo appended >>"$M/n/c"
echo "undrain b" >"$CTL"
repair_settled "$M" 30
one_file n/a o/b "$(printf 'start\nappended')" "$(stat -c %a "$T/a/n/a")"
one_file n/a n/c "$(printf 'start\nappended')" "$(stat -c %a "$T/a/n/a")"
log "n/c, linked and written while b was out: one file with n/a, o/b on b"

# a name of the book that cannot be a name any more (its directory made
# a symlink behind the mount: every head of it is refused) is no name of
# the file: the replay goes on with the others (it failed for good)
mkdir "$M/x" "$M/y" "$M/z"
echo one >"$M/x/a"
ln "$M/x/a" "$M/y/b"
ln "$M/x/a" "$M/z/c"
for r in a b; do rm -r "$T/$r/y" && ln -s /tmp "$T/$r/y"; done
echo "drain b" >"$CTL"
echo two >>"$M/x/a"
echo "undrain b" >"$CTL"
repair_settled "$M" 30
one_file x/a z/c "$(printf 'one\ntwo')" "$(stat -c %a "$T/a/x/a")"
log "a stale name of the book (y/b under a symlink) holds no replay up"

# a damaged book is cut at the bad record, said in an event that names
# it, and the mux runs on
unmount_smux "$M"
printf '{"op":"link","a":"../x","b":"y"}\n' >>"$T/state/c/m.links"
mount_smux "$T/c.conf" "$M"
timeout 10 grep -q 'm.links line [0-9]*: not a key' "$M/.smux/events" ||
	fail "no event names the bad record: $(cat "$M/.smux/events")"
one_file d/a g/h "$(printf 'start\nappended\nthird\nfourth')" 640
unmount_smux "$M"
