#!/usr/bin/env bash
# test_nospace.sh KIND - a full disk under a mirror or failover of two
# file backends (both on one 4 MiB tmpfs): the write that finds no room
# fails with ENOSPC ("No space left on device", as on a local disk),
# never EIO; the members stay up (a full disk still serves reads), so
# every other file reads, lists and is removed at once, and once there is
# room again a write lands on every replica. A full member once counted
# as a failed one: both went down and the whole mount answered EIO.
#
# Runs as root (mounts a tmpfs), like CI.
. "$(dirname "$0")/lib.sh"

KIND=${1:-mirror}
DISK=$T/disk
mkdir -p "$DISK"
mount -t tmpfs -o size=4m tmpfs "$DISK"
mkdir -p "$DISK/a" "$DISK/b"
new_config "$T/c.conf" root
cfg_mux root "$KIND" "a b" cooldown=10s
cfg_file a "$DISK/a"
cfg_file b "$DISK/b"
M=$T/mnt
mount_smux "$T/c.conf" "$M"

echo keep >"$M/other"
python3 - "$M/big" <<'PY' || fail "$KIND: the full disk's errors (above)"
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
failed = None
for i in range(96):  # 6 MiB in 64 KiB writes: more than the disk holds
    try:
        os.write(fd, b"x" * 65536)
    except OSError as e:
        failed = e
        break
if failed is None:
    sys.exit("6 MiB written onto a 4 MiB disk")
if failed.errno != errno.ENOSPC:
    sys.exit("the write that found no room: %s, not ENOSPC" % failed)
for what, call in (("fsync", lambda: os.fsync(fd)), ("close", lambda: os.close(fd))):
    try:
        call()
    except OSError as e:
        if e.errno != errno.ENOSPC:
            sys.exit("%s after the full disk: %s (ENOSPC or success)" % (what, e))
PY
# at once: the members are up, everything else still works
for b in a b; do
	[ "$(backend_stat "$M" "$b" status)" = up ] ||
		fail "$KIND: member $b is $(backend_stat "$M" "$b" status) after a full disk"
done
[ "$(cat "$M/other")" = keep ] || fail "$KIND: another file does not read after the full disk"
ls "$M" >/dev/null || fail "$KIND: ls failed after the full disk"
rm "$M/big" || fail "$KIND: rm of the big file failed after the full disk"
# room again: a file that fits lands (on both replicas of a mirror)
head -c 500000 /dev/urandom >"$T/small"
cp "$T/small" "$M/small" || fail "$KIND: a write with room again failed"
cmp "$T/small" "$M/small"
cmp "$T/small" "$DISK/a/small"
[ "$KIND" = mirror ] && cmp "$T/small" "$DISK/b/small"
unmount_smux "$M"
umount "$DISK"
log "$KIND: ok"
