#!/usr/bin/env bash
# test_drain_replay.sh - a mirror of two file backends whose replica b is
# drained while programs change the tree, then undrained and repaired:
# every hint ends and b holds what a holds - types, link groups, bytes
# through every name, user.* xattrs (found by an outside tester, s37-t1):
#   - cp -a of a file of three names: b got three files;
#   - an append through one name of a file of two: b's other name kept
#     the old bytes, and read so through the mount once a was drained;
#   - setfattr on a new directory: its hint failed at every pass
#     (IS_DIRECTORY), pendingHints never 0;
#   - a file and a FIFO replaced by directories, a directory by a
#     symlink: never converged (ls -l EIO, rm -rf left names behind);
#   - (s43-t1) the times of directories cp -a made: b had the replay's.
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" root
cfg_mux root mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
M=$T/mnt
mount_smux "$T/c.conf" "$M"
CTL=$M/.smux/ctl

# before the drain: a file of two names, and names that change type
echo old >"$M/f"
ln "$M/f" "$M/h"
echo 1 >"$M/f2d"
mkfifo "$M/p2d"
mkdir -p "$M/d2l/sub" "$M/tgt"
echo in >"$M/d2l/sub/in"
echo old >"$M/la"
echo old >"$M/la2"
echo old >"$M/l3"
echo old >"$M/lc"
echo old >"$M/lm"
echo old >"$M/lw"

timeout 20 sh -c "echo 'drain b' >'$CTL'" || fail "drain b"
S=$T/src
mkdir -p "$S/d"
echo linked >"$S/d/f1"
ln "$S/d/f1" "$S/d/f2"
ln "$S/d/f1" "$S/f3"
# times at the epoch (touch -d @0, SOURCE_DATE_EPOCH=0 builds): cp -a
# stored "now" on a (the mount showed 0 until a remount), and the
# replay's copy got "now" on b (s39-t2)
echo epoch >"$S/epoch"
ln -s epoch "$S/epoch-link"
touch -h -d @0 "$S/epoch" "$S/epoch-link"
# directories' times: cp -a sets them last; the replays of the files in
# them moved them to the replay's time on b (s43-t1: rsync -a then saw
# every directory changed once b answered)
touch -d @978307200 "$S/d" "$S"
timeout 60 cp -a "$S" "$M/copy"
echo new >>"$M/f"
mkdir "$M/xd"
setfattr -n user.dir -v dv "$M/xd"
rm "$M/f2d" "$M/p2d"
mkdir "$M/f2d" "$M/p2d"
echo y >"$M/f2d/y"
rm -r "$M/d2l"
ln -s tgt "$M/d2l"
# links b missed: a write through the new name, and a rename of the old
# one (s43-t3: b got the new name as a copy, and its old name kept the
# old bytes for good; a rename made it pick a name no longer there)
ln "$M/la" "$M/lb"
echo y >>"$M/lb"
ln "$M/la2" "$M/lb2" # ... and through the old name (its own hint too)
echo y >>"$M/la2"
ln "$M/l3" "$M/l3b" # a group of three (s43-t5: split)
ln "$M/l3" "$M/l3c"
echo y >>"$M/l3b"
ln "$M/lc" "$M/lcb" # a chmod through the new name (s43-t5: never on b)
chmod 600 "$M/lcb"
ln "$M/lm" "$M/ln"
mv "$M/lm" "$M/lm3"
ln "$M/lw" "$M/lx"
echo w >>"$M/lx"
# ... and an append through the old name held open across the undrain:
# the replay of lx found lw's writer open and copied, b's lw got the
# append without w and lx stayed a file of its own (s43-t5)
timeout 30 python3 - "$M" <<'PY' || fail "undrain b with lw open"
import sys, time
m = sys.argv[1]
with open(m + "/.smux/ctl", "w") as c:
    c.write("undrain b\n")
with open(m + "/lw", "a") as f:
    f.write("c\n")
    f.flush()
    with open(m + "/.smux/ctl", "w") as c:
        c.write("repair\n")
    time.sleep(1)
PY

end=$((SECONDS + 30))
while :; do
	timeout 60 sh -c "echo repair >'$CTL'" || true
	h=$(stats "$M" .pendingHints)
	[ "$h" = 0 ] && break
	[ "$SECONDS" -lt "$end" ] || fail "pendingHints still $h after 30 s of repairs"
	sleep 1
done
log "hints replayed"

# b holds what a holds: types, link counts, bytes, xattrs
listing() {
	(cd "$1" && find . -path ./.smuxfs-tmp -prune -o -mindepth 1 \
		-printf '%P %y %n %s %l\n' | sort &&
		find . -path ./.smuxfs-tmp -prune -o -type f -print0 | sort -z |
		xargs -0 -r md5sum)
}
listing "$T/a" >"$T/la"
listing "$T/b" >"$T/lb"
diff -u "$T/la" "$T/lb" >&2 || fail "b differs from a after the repair"
[ "$(getfattr --only-values -n user.dir "$T/b/xd" 2>/dev/null)" = dv ] ||
	fail "user.dir of xd not on b"
[ "$(stat -c %h "$T/b/copy/d/f1")" = 3 ] || fail "copy/d/f1 on b: $(stat -c %h "$T/b/copy/d/f1") names, want 3"
[ "$(stat -c %i "$T/b/f")" = "$(stat -c %i "$T/b/h")" ] || fail "f and h are two files on b"
[ "$(stat -c %i "$T/b/la")" = "$(stat -c %i "$T/b/lb")" ] || fail "la and lb are two files on b"
[ "$(cat "$T/b/la")" = "$(printf 'old\ny')" ] || fail "la on b: $(cat "$T/b/la")"
[ "$(stat -c %i "$T/b/ln")" = "$(stat -c %i "$T/b/lm3")" ] || fail "ln and lm3 are two files on b"
[ "$(stat -c %i "$T/b/la2")" = "$(stat -c %i "$T/b/lb2")" ] || fail "la2 and lb2 are two files on b"
[ "$(stat -c '%i %h' "$T/b/l3" "$T/b/l3b" "$T/b/l3c" | sort -u | wc -l)" = 1 ] ||
	fail "l3, l3b, l3c on b: $(stat -c '%n %i %h' "$T/b/l3" "$T/b/l3b" "$T/b/l3c" | tr '\n' ' ')"
[ "$(stat -c %a "$T/b/lc")" = 600 ] || fail "lc on b: mode $(stat -c %a "$T/b/lc"), want 600"
[ "$(stat -c %i "$T/b/lw")" = "$(stat -c %i "$T/b/lx")" ] || fail "lw and lx are two files on b"
[ "$(cat "$T/b/lw")" = "$(printf 'old\nw\nc')" ] || fail "lw on b: $(cat "$T/b/lw")"
for r in a b; do
	for n in epoch epoch-link; do
		[ "$(stat -c %Y "$T/$r/copy/$n")" = 0 ] ||
			fail "copy/$n on $r: mtime $(stat -c %Y "$T/$r/copy/$n"), want 0"
	done
done
for dir in copy copy/d; do
	[ "$(stat -c %Y "$T/b/$dir")" = 978307200 ] ||
		fail "$dir on b: mtime $(stat -c %Y "$T/b/$dir"), want 978307200 (as on a: $(stat -c %Y "$T/a/$dir"))"
done
[ -L "$T/b/d2l" ] && [ -d "$T/b/f2d" ] && [ -d "$T/b/p2d" ] ||
	fail "types on b: $(stat -c '%n %F' "$T/b/d2l" "$T/b/f2d" "$T/b/p2d")"

# b alone serves what was acknowledged, through every name
timeout 20 sh -c "echo 'drain a' >'$CTL'" || fail "drain a"
[ "$(cat "$M/h")" = "$(printf 'old\nnew')" ] || fail "h through b: $(cat "$M/h")"
timeout 20 ls -lR "$M" >/dev/null || fail "ls -lR with b alone"
timeout 60 rm -rf "$M/copy" "$M/f2d" "$M/p2d" "$M/d2l" "$M/xd" ||
	fail "rm -rf with b alone"
timeout 20 sh -c "echo 'undrain a' >'$CTL'" || fail "undrain a"
log "b alone served every name; removals through it worked"
