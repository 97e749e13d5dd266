#!/usr/bin/env bash
# test_failover_drained.sh - a failover mount whose primary is out
# (drained), found by an outside tester (s39-t3, failover [s3, file] with
# the s3 primary stopped):
#
# 1. cp -a of new files: their times are set through the open descriptor
# before close (futimens), which answered EIO (the time went to the key's
# holder, the primary, not to the file being written on the standby), so
# cp -a failed for every file.
#
# 2. A directory rename that cannot be done whole is not done at all.
# failover [a, b] of file backends, b kept in sync as failover expects
# (the files copied there), a drained: a file written meanwhile goes to
# b (hinted for a), and `mv d d2` cannot be one call per replica, so the
# daemon moves key by key; the files a holds the latest versions of
# cannot be moved while a is out (EIO). Before, the new file had moved
# by then: mv failed with d2 = {new1} and d = {old1 old2}, a split the
# replay then made on both replicas. Now the moved keys go back: mv
# fails with nothing moved, and after the undrain and the repair both
# replicas hold d = {new1 old1 old2} and no d2.
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" root
cfg_mux root failover "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
M=$T/mnt
mount_smux "$T/c.conf" "$M"
CTL=$M/.smux/ctl

mkdir "$M/d"
echo old1 >"$M/d/old1"
echo old2 >"$M/d/old2"
mkdir -p "$T/b/d"
cp -p "$T/a/d/old1" "$T/a/d/old2" "$T/b/d/"

timeout 20 sh -c "echo 'drain a' >'$CTL'" || fail "drain a"

# 1. new files' times through their open descriptors
mkdir -p "$T/src"
for i in 1 2 3; do echo "c$i" >"$T/src/c$i"; done
touch -d @978307200 "$T/src/c2"
timeout 60 cp -a "$T/src" "$M/copied" 2>"$T/cp.err" ||
	fail "cp -a while a is drained: $(cat "$T/cp.err")"
[ "$(stat -c %Y "$M/copied/c2")" = 978307200 ] ||
	fail "cp -a kept no mtime: $(stat -c %Y "$M/copied/c2")"
python3 - "$M/new-times" <<'PY' || fail "futimens on a new open file while a is drained"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"x")
os.utime(fd, (978307200, 978307200))
os.close(fd)
assert os.stat(sys.argv[1]).st_mtime == 978307200, os.stat(sys.argv[1])
PY

# 2. mv d d2
echo new1 >"$M/d/new1" || fail "write while a is drained"
rc=0
timeout 60 mv "$M/d" "$M/d2" 2>"$T/mv.err" || rc=$?
log "mv d d2 while a is drained: rc $rc ($(cat "$T/mv.err"))"
# listing DIR: its names on one line ("" when it is not there)
listing() { (cd "$1" 2>/dev/null && ls | tr '\n' ' ') || true; }
if [ "$rc" = 0 ]; then
	[ "$(listing "$M/d2")" = "new1 old1 old2 " ] && [ ! -e "$M/d" ] ||
		fail "mv said it moved d: d2 = '$(listing "$M/d2")', d = '$(listing "$M/d")'"
	want=d2
else
	[ ! -e "$M/d2" ] && [ "$(listing "$M/d")" = "new1 old1 old2 " ] ||
		fail "mv failed half-way: d2 = '$(listing "$M/d2")', d = '$(listing "$M/d")' (want d2 absent, d = new1 old1 old2)"
	want=d
fi

timeout 20 sh -c "echo 'undrain a' >'$CTL'" || fail "undrain a"
repair_settled "$M" 60
for r in a b; do
	[ "$(listing "$T/$r/$want")" = "new1 old1 old2 " ] ||
		fail "replica $r: $want = '$(listing "$T/$r/$want")' after the repair"
	for other in d d2; do
		[ "$other" = "$want" ] || [ ! -e "$T/$r/$other" ] ||
			fail "replica $r still has $other: '$(listing "$T/$r/$other")'"
	done
	[ "$(cat "$T/$r/$want/new1")" = new1 ] || fail "replica $r: $want/new1 differs"
done
unmount_smux "$M"
