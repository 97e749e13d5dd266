#!/usr/bin/env bash
# test_rcache.sh - the on-disk read cache (read_cache = on) over a slow
# backend standing in for a network one: a failover mux whose only member
# is a faulty backend adding 30 ms to every call, over a file backend.
#
#   - the cache files an earlier run left in cache_dir/read are deleted
#     at the mount, and nothing else there (a file the cache never made
#     stays, and the log says so);
#   - the first read of each file fills the cache once (readCache.fills);
#     after the kernel's pages of those files are dropped, a second read
#     is served by the daemon from the cache: identical content, no fill,
#     nothing left to the backend (bypassed), and at most one backend call
#     per file (the head of the open, close-to-open) where a read from the
#     backend would need a get as well;
#   - a file overwritten through the mount, or changed in the backend
#     directly, reads back with its new content (a new version is a miss);
#   - writing and reading more than cache_size of files keeps the cache
#     directory within cache_size (du), with evictions counted;
#   - read_cache = auto (the default) is off over local backends, and
#     -o read_cache=on turns it on; a clean unmount leaves cache_dir/read
#     empty.
. "$(dirname "$0")/lib.sh"

M=$T/mnt
N=${SMUX_IT_RCACHE_FILES:-20}
CAP_MB=16
CAP=$((CAP_MB * 1024 * 1024))

new_config "$T/m.conf" m read_cache=on attr_timeout=60s entry_timeout=60s
cfg_mux m failover "net" backend_timeout=30s
cfg_faulty net disk latency=30ms
cfg_file disk "$T/disk"
RDIR=$T/cache/m/read

# now_ms: the wall clock in milliseconds.
now_ms() {
	local t=${EPOCHREALTIME/./}
	echo $((10#$t / 1000))
}

# rc FIELD: one readCache counter of the mount.
rc() { stats "$M" ".readCache.$1"; }
# calls: calls the mux made to its member (every operation).
calls() { jq -r '.backends[0] | .hits + .misses + .errors + .timeouts' "$M/.smux/stats"; }

# drop_pages FILE...: drops the kernel's page cache of each file, so the
# next read reaches the daemon (per file: nothing global).
drop_pages() {
	local f
	for f in "$@"; do
		dd if="$f" iflag=nocache count=0 status=none
	done
}

mkdir -p "$T/disk/data" "$T/src"
for ((i = 0; i < N; i++)); do
	head -c $((200 * 1024 + i * 1000)) /dev/urandom >"$T/src/f$i"
	cp "$T/src/f$i" "$T/disk/data/f$i"
done
# left by an earlier run (named as the cache names its files): must be
# gone once mounted; what the cache never made stays, and the log says so
mkdir -p "$RDIR"
OWN1=$(printf '%064d-%016x' 0 1)
OWN2=$(printf '%s-%016x' 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef 255)
echo stale >"$RDIR/$OWN1"
echo stale >"$RDIR/$OWN2"
echo kept >"$RDIR/not-a-cache-file"

mount_smux "$T/m.conf" "$M" "cache_size=${CAP_MB}M"

log "start: the previous run's cache files are deleted, nothing else"
[ "$(ls -A "$RDIR")" = not-a-cache-file ] || fail "cache_dir/read at start: $(ls -A "$RDIR")"
grep -q "1 entry in the cache directory not made by the cache" "$T"/smuxfs.*.log ||
	fail "the log does not say what the discard left"
rm "$RDIR/not-a-cache-file"
[ "$(rc enabled)" = true ] || fail "readCache.enabled is not true"
[ "$(rc capacityBytes)" -eq "$CAP" ] || fail "capacityBytes $(rc capacityBytes), want $CAP (-o cache_size)"

# --- first and second read ----------------------------------------------------------
ls "$M/data" >/dev/null # lookups now, not counted below
for ((i = 0; i < N; i++)); do stat "$M/data/f$i" >/dev/null; done
log "first read of $N files"
t0=$(now_ms)
for ((i = 0; i < N; i++)); do
	cmp "$T/src/f$i" "$M/data/f$i" || fail "f$i differs on the first read"
done
t1=$(($(now_ms) - t0))
fills1=$(rc fills)
miss1=$(rc misses)
byp1=$(rc bypassed)
hits1=$(rc hits)
log "first read: ${t1} ms, fills $fills1, hits $hits1, bypassed $byp1"
[ "$fills1" -eq "$N" ] || fail "fills $fills1 after reading $N files once, want $N"
[ "$miss1" -eq "$N" ] || fail "misses $miss1, want $N"
[ "$byp1" -eq 0 ] || fail "bypassed $byp1 reads of cacheable files"
[ "$(find "$RDIR" -type f | wc -l)" -eq "$N" ] || fail "cache_dir/read holds $(find "$RDIR" -type f | wc -l) files, want $N"

drop_pages "$M"/data/f* # opens them: a head each
calls1=$(calls)
log "second read (kernel pages dropped)"
t0=$(now_ms)
for ((i = 0; i < N; i++)); do
	cmp "$T/src/f$i" "$M/data/f$i" || fail "f$i differs on the second read (from the cache)"
done
t2=$(($(now_ms) - t0))
calls2=$(calls)
log "second read: ${t2} ms, fills $(rc fills), hits $(rc hits), backend calls $((calls2 - calls1))"
[ "$(rc hits)" -ge $((hits1 + N)) ] ||
	fail "hits $hits1 -> $(rc hits): the second read did not reach the daemon's cache"
[ "$(rc fills)" -eq "$fills1" ] || fail "the second read filled again ($fills1 -> $(rc fills))"
[ "$(rc misses)" -eq "$miss1" ] || fail "the second read missed ($miss1 -> $(rc misses))"
[ "$(rc bypassed)" -eq "$byp1" ] || fail "the second read went to the backend ($byp1 -> $(rc bypassed) bypassed)"
# one head per open; reading from the backend would add a get per file
[ $((calls2 - calls1)) -le $((N + 2)) ] ||
	fail "the second read made $((calls2 - calls1)) backend calls for $N files"

# --- new versions -----------------------------------------------------------------------
log "overwrite through the mount"
head -c 150000 /dev/urandom >"$T/new0"
cp "$T/new0" "$M/data/f0"
drop_pages "$M/data/f0"
cmp "$T/new0" "$M/data/f0" || fail "f0 reads old content after an overwrite through the mount"
printf 'short now\n' >"$M/data/f1"
drop_pages "$M/data/f1"
[ "$(cat "$M/data/f1")" = "short now" ] || fail "f1 reads old content after a truncating write"
cmp "$T/new0" "$T/disk/data/f0" || fail "the overwrite did not reach the backend"

log "change in the backend, outside the mount (same size)"
cp "$T/src/f2" "$T/f2.new"
printf 'CHANGED' | dd of="$T/f2.new" bs=1 seek=1000 conv=notrunc status=none
sleep 0.05
cp "$T/f2.new" "$T/disk/data/f2.tmp"
mv "$T/disk/data/f2.tmp" "$T/disk/data/f2"
cmp "$T/f2.new" "$M/data/f2" || fail "f2 reads the old version after it changed in the backend"

log "rename and unlink through the mount"
mv "$M/data/f3" "$M/data/f3.moved"
drop_pages "$M/data/f3.moved"
cmp "$T/src/f3" "$M/data/f3.moved" || fail "f3 differs after a rename"
rm "$M/data/f4"
[ ! -e "$M/data/f4" ] || fail "f4 still there after rm"
[ "$(rc fillFailures)" -eq 0 ] || fail "fillFailures $(rc fillFailures)"

# --- the size limit ---------------------------------------------------------------------
log "more than cache_size (${CAP_MB} MiB) of files"
mkdir -p "$M/big"
for ((i = 0; i < 2 * CAP_MB; i++)); do
	head -c $((1024 * 1024 - i * 100)) /dev/urandom >"$T/b$i"
	cp "$T/b$i" "$M/big/b$i"
done
for ((i = 0; i < 2 * CAP_MB; i++)); do
	cmp "$T/b$i" "$M/big/b$i" || fail "big/b$i differs"
	if ((i % 8 == 7)); then
		used=$(du -sB1 "$RDIR" | cut -f1)
		dirsz=$(stat -c %s "$RDIR")
		[ $((used - dirsz)) -le "$CAP" ] || fail "cache_dir/read uses $used bytes (directory $dirsz) > $CAP"
	fi
done
drop_pages "$M"/big/b*
for ((i = 2 * CAP_MB - 1; i >= 0; i--)); do
	cmp "$T/b$i" "$M/big/b$i" || fail "big/b$i differs on the second read"
done
used=$(du -sB1 "$RDIR" | cut -f1)
apparent=$(du -sb "$RDIR" | cut -f1)
dirsz=$(stat -c %s "$RDIR")
log "cache_dir/read: $used bytes on disk ($apparent apparent, directory $dirsz), readCache.bytes $(rc bytes), entries $(rc entries), evictions $(rc evictions)"
[ $((used - dirsz)) -le "$CAP" ] || fail "cache_dir/read uses $used bytes > $CAP"
[ $((apparent - dirsz)) -le "$CAP" ] || fail "cache_dir/read holds $apparent bytes > $CAP"
[ "$(rc bytes)" -le "$CAP" ] || fail "readCache.bytes $(rc bytes) > $CAP"
[ "$(rc evictions)" -gt 0 ] || fail "no eviction after reading $((2 * CAP_MB)) MiB through a ${CAP_MB} MiB cache"
[ "$(find "$RDIR" -type f | wc -l)" -eq "$(rc entries)" ] || fail "files on disk differ from readCache.entries"
find "$RDIR" -name '*.tmp' | grep -q . && fail "a temporary fill file is left"
# a file over cache_size / 4 is cached in segments of at most a quarter
# (4 MiB and 1 byte here): nothing read past the cache, and a second read
# is served from it
head -c $((CAP / 4 + 1)) /dev/urandom >"$T/huge"
cp "$T/huge" "$M/huge"
drop_pages "$M/huge"
byp=$(rc bypassed)
fills=$(rc fills)
cmp "$T/huge" "$M/huge" || fail "huge differs"
[ "$(rc bypassed)" -eq "$byp" ] || fail "a file over cache_size/4 was read past the cache"
[ "$(rc fills)" -gt "$fills" ] || fail "a file over cache_size/4 was not cached"
fills=$(rc fills)
drop_pages "$M/huge"
cmp "$T/huge" "$M/huge" || fail "huge differs on the second read"
[ "$(rc fills)" -eq "$fills" ] || fail "the second read of huge fetched again"
[ "$(rc bytes)" -le "$CAP" ] || fail "readCache.bytes $(rc bytes) > $CAP"

unmount_smux "$M"
[ -z "$(ls -A "$RDIR")" ] || fail "cache_dir/read not emptied at unmount: $(ls -A "$RDIR" | head -3)"

# --- auto and -o ------------------------------------------------------------------------
log "read_cache = auto over local backends is off; -o read_cache=on turns it on"
sed -i '/^read_cache = on$/d' "$T/m.conf"
mount_smux "$T/m.conf" "$M"
[ "$(rc enabled)" = false ] || fail "read_cache = auto is on without a network backend"
cmp "$T/src/f5" "$M/data/f5" || fail "f5 differs without the cache"
[ "$(rc fills)" -eq 0 ] || fail "a fill with the cache off"
unmount_smux "$M"
mount_smux "$T/m.conf" "$M" "read_cache=on"
[ "$(rc enabled)" = true ] || fail "-o read_cache=on did not turn the cache on"
cmp "$T/src/f5" "$M/data/f5" || fail "f5 differs with -o read_cache=on"
[ "$(rc fills)" -eq 1 ] || fail "fills $(rc fills) after one read with -o read_cache=on"
unmount_smux "$M"
log "timings: $N files, first read ${t1} ms, second read (cache) ${t2} ms"
