#!/usr/bin/env bash
# test_staging_full.sh - a full staging disk on an s3 mount (cache_dir's
# staging/ on a 4 MiB tmpfs): a write that needs more room fails with
# ENOSPC ("No space left on device", as on a local disk), never EIO; the
# backend is not charged a failure; once there is room again writes work.
# Files created with O_TRUNC go through the s3 writer (parts sent while
# written), whose staging errors once reached the caller as EIO.
#
# Runs as root (mounts a tmpfs), like CI.
. "$(dirname "$0")/lib.sh"

CONF=$T/s3.conf
net_config s3 "$CONF"
M=$T/mnt
STAGE=$T/cache/$(basename "$CONF" .conf)/staging
mkdir -p "$STAGE"
mount -t tmpfs -o size=4m tmpfs "$STAGE"
mount_smux "$CONF" "$M"

out=$(dd if=/dev/zero of="$M/big" bs=1M count=8 2>&1) &&
	fail "8 MiB through a 4 MiB staging disk succeeded"
case $out in
*"No space left on device"*) ;;
*) fail "a full staging disk: '$out', not ENOSPC" ;;
esac
log "full staging disk: $(echo "$out" | head -1)"
rm -f "$M/big"
[ "$(backend_stat "$M" m status)" = up ] ||
	fail "the backend is $(backend_stat "$M" m status) after a full staging disk"
[ "$(backend_stat "$M" m consecutiveFailures)" -eq 0 ] ||
	fail "the backend was charged for the staging disk"

# room again: a file that fits is written and read back
head -c 100000 /dev/urandom >"$T/small"
cp "$T/small" "$M/small" || fail "a write after the full disk failed"
cmp "$T/small" "$M/small"
unmount_smux "$M"
umount "$STAGE"
stop_net_servers
