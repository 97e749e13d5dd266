#!/usr/bin/env bash
# test_localerr.sh - errors of the daemon's own side are not the backends'
# (issue 9 item 5, DESIGN section 6 "Local errors are not backend errors"),
# and a request a backend refuses as too large is the caller's error:
#
#   - a mirror of two file backends with the read cache on and cache_dir
#     on a tiny tmpfs that is full: every read of an existing file works
#     (the failed cache fill falls back to a direct read), both backends
#     stay up with no failure charged; the fills really failed (the cache
#     counts them). On main, 7 of 8 reads failed with EIO and both
#     backends were marked down.
#   - `truncate -s 999999999999999 f` returns EFBIG ("File too large"),
#     both replicas stay up, f keeps its content, and the next `rm f`
#     works on both. On main, both replicas were marked down and the rm
#     failed with EIO.
#   - a pwrite and an ftruncate at 32 TiB through an open descriptor fail
#     with EFBIG, and the descriptor writes on and closes with 0, on both
#     replicas, no hint kept. On main the next write failed with EIO.
#
# Runs as root (mounts a tmpfs), like CI.
. "$(dirname "$0")/lib.sh"

M=$T/mnt
N=8

new_config "$T/m.conf" m read_cache=on
cfg_mux m mirror "r1 r2" backend_timeout=10s
cfg_file r1 "$T/r1"
cfg_file r2 "$T/r2"

# cache_dir on an 8 MiB tmpfs (unmounted by the harness's cleanup if the
# test fails, as a leftover mount under $T)
mkdir -p "$T/cache" "$T/src"
mount -t tmpfs -o size=8m tmpfs "$T/cache"
for ((i = 0; i < N; i++)); do
	head -c $((1536 * 1024 + i * 1000)) /dev/urandom >"$T/src/f$i"
	cp "$T/src/f$i" "$T/r1/f$i"
	cp "$T/src/f$i" "$T/r2/f$i"
done

# a cache that believes it has room on a disk that has none
mount_smux "$T/m.conf" "$M" "cache_size=64M"
[ "$(stats "$M" .readCache.enabled)" = true ] || fail "the read cache is not on"
dd if=/dev/zero of="$T/cache/filler" bs=1M 2>/dev/null || true
log "cache_dir: $(df -h --output=avail "$T/cache" | tail -1 | tr -d ' ') left"

# status and consecutive failures of every member, one line
members() {
	jq -r '[.backends[] | "\(.name)=\(.status)/\(.consecutiveFailures)"] | join(" ")' "$M/.smux/stats"
}

log "read $N files through a full cache_dir"
bad=0
for ((i = 0; i < N; i++)); do
	cmp -s "$T/src/f$i" "$M/f$i" || { log "f$i: read failed or differs"; bad=$((bad + 1)); }
done
log "members: $(members); fills failed: $(stats "$M" .readCache.fillFailures)"
[ "$bad" -eq 0 ] || fail "$bad of $N reads failed with the cache disk full"
[ "$(stats "$M" .readCache.fillFailures)" -ge 1 ] ||
	fail "no cache fill failed: the cache disk was not full"
for b in r1 r2; do
	[ "$(backend_stat "$M" $b status)" = up ] || fail "$b is $(backend_stat "$M" $b status) after a full cache disk"
	[ "$(backend_stat "$M" $b consecutiveFailures)" -eq 0 ] ||
		fail "$b was charged $(backend_stat "$M" $b consecutiveFailures) failures for the cache disk"
done
rm -f "$T/cache/filler"

log "truncate -s 999999999999999 f0"
expect_fail "File too large" truncate -s 999999999999999 "$M/f0"
log "members: $(members)"
for b in r1 r2; do
	[ "$(backend_stat "$M" $b status)" = up ] || fail "$b is $(backend_stat "$M" $b status) after an EFBIG truncate"
done
cmp "$T/src/f0" "$M/f0" || fail "f0 changed after a refused truncate"
cmp "$T/src/f0" "$T/r1/f0" || fail "f0 changed on r1 after a refused truncate"
cmp "$T/src/f0" "$T/r2/f0" || fail "f0 changed on r2 after a refused truncate"
rm "$M/f0" || fail "rm after an EFBIG truncate failed"
if [ -e "$T/r1/f0" ] || [ -e "$T/r2/f0" ]; then
	fail "f0 not removed from both replicas"
fi

# the same through an open descriptor: a pwrite and an ftruncate past
# the largest file size fail with EFBIG, and that descriptor writes on
# and closes with 0 (on main the refused pwrite dropped both replica
# writers: the next write failed with EIO and close with EFBIG)
log "pwrite and ftruncate at 32 TiB through an open f1, then write on"
python3 - "$M/f1" <<'EOF' || fail "f1: a refused pwrite spoiled its descriptor"
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
for what, call in (("pwrite", lambda: os.pwrite(fd, b"x", 2**45)),
                   ("ftruncate", lambda: os.ftruncate(fd, 2**45))):
    try:
        call()
        sys.exit("%s at 32 TiB succeeded" % what)
    except OSError as e:
        if e.errno != errno.EFBIG:
            sys.exit("%s at 32 TiB: %s, not EFBIG" % (what, e))
assert os.pwrite(fd, b"HEAD", 0) == 4
os.close(fd)
EOF
for f in "$M/f1" "$T/r1/f1" "$T/r2/f1"; do
	[ "$(head -c 4 "$f")" = HEAD ] || fail "$f lacks the write after the refused pwrite"
	cmp -s <(tail -c +5 "$T/src/f1") <(tail -c +5 "$f") || fail "$f: the rest changed"
done
for b in r1 r2; do
	[ "$(backend_stat "$M" $b status)" = up ] || fail "$b is $(backend_stat "$M" $b status) after an EFBIG pwrite"
done
[ "$(stats "$M" .pendingHints)" = 0 ] || fail "a refused pwrite left $(stats "$M" .pendingHints) hints"

# the next ones still work, on both replicas
echo "after" >"$M/new"
for b in r1 r2; do
	[ "$(cat "$T/$b/new")" = after ] || fail "a write after the truncate did not reach $b"
done
for b in r1 r2; do
	[ "$(backend_stat "$M" $b status)" = up ] || fail "$b is down at the end"
done

unmount_smux "$M"
umount "$T/cache"
