#!/usr/bin/env bash
# test_http_read.sh - the daemon's read path and metadata requests on an
# http (WebDAV) mount of an nginx the test starts on loopback: a cold
# sequential read of a large file (read-ahead in ranged gets), random reads
# of another (each fetches its own chunk, not the whole file), `cat` of
# small files, `ls -l` of a 1000-entry directory, `tar -x` of a small tree
# and `rm -r`, and a file larger than a quarter of cache_size read through
# segments of the cache; every read compared with the source, and the requests each
# step sent counted from nginx's access log and checked against upper
# bounds (counts, not times).
#
# SMUX_HTTP_READ_MB sets the large file's size (default 32; the numbers in
# docs/architecture.md were measured with 256).
. "$(dirname "$0")/lib.sh"

NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if [ ! -x "$NGINX" ] || [ ! -f /usr/lib/nginx/modules/ngx_http_dav_ext_module.so ]; then
	log "*** SKIPPED: nginx or libnginx-mod-http-dav-ext missing (scripts/install-deps.sh installs them) ***"
	exit 0
fi
MB=${SMUX_HTTP_READ_MB:-32}

# nginx in the foreground, everything under $T/ng (its command line names
# $T, so the harness's cleanup stops it even when this test fails)
NG=$T/ng
mkdir -p "$NG/root"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# (the fixture's config, with an access log that also shows each
# request's Depth and Range headers)
# shellcheck disable=SC2016
sed -e "s#@DIR@#$NG#g; s#@ROOT@#$NG/root#g; s#@PORT@#$PORT#g" \
	-e "s#@USER@#$([ "$(id -u)" = 0 ] && echo 'user root;')#" \
	-e 's#^\taccess_log .*#\tlog_format smux "$request_method $uri $status $body_bytes_sent depth=$http_depth range=$http_range";\n\taccess_log @DIR@/access.log smux;#' \
	-e "s#@DIR@#$NG#g" \
	"$SMUX_REPO/tests/servers/nginx-dav.conf" >"$NG/nginx.conf"
"$NGINX" -e "$NG/server.log" -p "$NG" -c "$NG/nginx.conf" >"$NG/server.log" 2>&1 &
NGPID=$!
for ((i = 0; i < 200; i++)); do
	curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break
	kill -0 "$NGPID" 2>/dev/null || { cat "$NG/server.log" >&2; fail "nginx exited"; }
	sleep 0.1
done
log "nginx on 127.0.0.1:$PORT (pid $NGPID)"

# the requests nginx logged since mark_log, by method ("GET 3 HEAD 1");
# and the count or the body bytes of one method
LOGMARK=0
mark_log() { LOGMARK=$(wc -l <"$NG/access.log"); }
since() { tail -n +"$((LOGMARK + 1))" "$NG/access.log"; }
# (the log has "METHOD URI STATUS BYTES depth=D range=R"; a PROPFIND
# of depth 0 is the http backend's head, counted as HEAD0)
by_method() { since | awk '{m=$1; if (m=="PROPFIND" && $5=="depth=0") m="HEAD0"; n[m]++} END {for (k in n) printf "%s %d ", k, n[k]}'; }
count() { since | awk -v m="$1" '{k=$1; if (k=="PROPFIND" && $5=="depth=0") k="HEAD0"} k==m' | wc -l; }
bytes_of() { since | awk -v m="$1" -v p="$2" '$1==m && $2==p {b+=$4} END {print b+0}'; }

# bound MSG COND...: COND must hold; with SMUX_HTTP_READ_MEASURE set (to
# measure an older build) a broken bound is only logged
bound() {
	local msg=$1
	shift
	"$@" && return 0
	[ -n "${SMUX_HTTP_READ_MEASURE:-}" ] && { log "BOUND BROKEN: $msg"; return 0; }
	fail "$msg"
}

# the data, written straight into the server's root: every read is cold
head -c $((MB * 1024 * 1024)) /dev/urandom >"$NG/root/big"
head -c $((16 * 1024 * 1024)) /dev/urandom >"$NG/root/rnd"
mkdir "$NG/root/small" "$NG/root/many"
for i in $(seq 1 50); do head -c $((i * 997)) /dev/urandom >"$NG/root/small/f$i"; done
for i in $(seq 1 1000); do echo "$i" >"$NG/root/many/e$i"; done
S=$T/src
make_tree "$S" 2 5
(cd "$S" && tar cf "$T/t.tar" .)
nfiles=$(find "$S" -type f | wc -l)
ndirs=$(find "$S" -mindepth 1 -type d | wc -l)

CONF=$T/read.conf
new_config "$CONF" m
cfg_mux m failover "d"
cfg_raw "[backend d]
type = http
url = http://127.0.0.1:$PORT/
"
M=$T/mnt
mount_smux "$CONF" "$M"

# 1. a cold sequential read: read-ahead in ranged gets of up to 8 MiB
# (a reader that catches up with the read-ahead - a fast reader, a slow
# server - fetches its own 1 MiB chunks: how many gets that makes depends
# on timing, so the bound is the one that does not: at most one get per
# chunk, each byte once, far below one get per kernel read of 128 KiB;
# about one get per 3 MiB is usual here)
mark_log
t0=$(date +%s%N)
cat "$M/big" >/dev/null
t1=$(date +%s%N)
gets=$(count GET)
log "cold sequential read of $MB MiB: $(by_method) ($(((t1 - t0) / 1000000)) ms, informational)"
cmp "$NG/root/big" "$M/big"
bound "$gets gets for $MB MiB" [ "$gets" -le "$MB" ]
bound "the big file was fetched more than once" \
	[ "$(bytes_of GET /big)" -le $((MB * 1024 * 1024)) ]
ra_gets=$(stats "$M" .readCache.readAheadGets)
ra_max=$(stats "$M" .readCache.readAheadInflightMax)
log "read-ahead: $ra_gets gets, at most $ra_max bytes at once"
bound "no read-ahead for a sequential reader" [ "$ra_gets" -gt 0 ]
bound "read-ahead over its budget" \
	[ "$ra_max" -le "$(stats "$M" .readCache.readAheadBudget)" ]

# 2. random reads of another file: each fetches its own 1 MiB chunk,
# never the whole 16 MiB object
mark_log
for off in 13 7 11 3 14 2; do
	cmp <(dd if="$NG/root/rnd" bs=4k skip=$((off * 256 + 5)) count=2 2>/dev/null) \
		<(dd if="$M/rnd" bs=4k skip=$((off * 256 + 5)) count=2 2>/dev/null)
done
log "6 random reads: $(by_method), $(bytes_of GET /rnd) bytes"
bound "$(count GET) gets for 6 random reads" [ "$(count GET)" -le 12 ]
bound "random reads fetched $(bytes_of GET /rnd) bytes of a 16 MiB file" \
	[ "$(bytes_of GET /rnd)" -le $((12 * 1024 * 1024)) ]

# 3. cat of small files: one get each, no more
mark_log
t0=$(date +%s%N)
cat "$M"/small/f* >/dev/null
t1=$(date +%s%N)
log "cat of 50 small files: $(by_method) ($(((t1 - t0) / 1000000)) ms, informational)"
for i in $(seq 1 50); do cmp "$NG/root/small/f$i" "$M/small/f$i"; done
bound "$(count GET) gets for 50 small files" [ "$(count GET)" -le 50 ]

# 4. ls -l of 1000 entries: attributes from the listing, no HEAD per entry
mark_log
# shellcheck disable=SC2010 # ls -l itself is what is measured
[ "$(ls -l "$M/many" | grep -c '^-')" = 1000 ] || fail "ls -l lost entries"
log "ls -l of 1000 entries: $(by_method)"
bound "$(count HEAD0) heads for ls -l" [ "$(count HEAD0)" -le 5 ]
bound "$(count PROPFIND) listings for ls -l" [ "$(count PROPFIND)" -le 5 ]

# 5. tar -x of a small tree: one put per file, its metadata in that put
mark_log
mkdir "$M/untar"
tar xf "$T/t.tar" -C "$M/untar"
log "tar -x of $nfiles files, $ndirs dirs: $(by_method)"
bound "$(count PUT) puts for $nfiles files" [ "$(count PUT)" -le "$nfiles" ]
# nginx refuses PROPPATCH (405): the backend asks once per mount
bound "$(count PROPPATCH) proppatches for $nfiles files" [ "$(count PROPPATCH)" -le 1 ]
# a created file asks the server nothing until its put: per file two
# lookups (file, directory) and the parent's (kernel caches expiring on a
# slow run may add a few); per directory more (its attributes)
bound "$(count HEAD0) heads for tar -x" [ "$(count HEAD0)" -le $((5 * nfiles + 16 * ndirs)) ]

diff -r "$S" "$M/untar"

# 6. rm -r: a delete per entry, no head first
mark_log
rm -r "$M/untar"
log "rm -r of the tree: $(by_method)"
[ ! -e "$M/untar" ] || fail "rm -r left untar"
# (directories are looked up; files are only deleted)
(cd "$S" && find . -type f | sed 's#^\.#/untar#') >"$T/files"
fheads=$(since | awk '$1=="PROPFIND" && $5=="depth=0" {print $2}' | grep -cxFf "$T/files" || true)
bound "$fheads heads of files for rm -r" [ "$fheads" -le 0 ]
bound "$(count DELETE) deletes for rm -r" [ "$(count DELETE)" -le $((nfiles + ndirs + 1)) ]

unmount_smux "$M"

# 7. a file larger than a quarter of cache_size (16 MiB: 4 MiB segments):
# cached in segments, read ahead across them, each byte fetched once, none
# read past the cache (it used to be a get per kernel read, no read-ahead)
mount_smux "$CONF" "$M" "cache_size=16M"
mark_log
cat "$M/big" >/dev/null
# (counted before cmp reads the file again: pages the kernel dropped
# meanwhile come from segments that may be evicted by then)
gets=$(count GET)
got=$(bytes_of GET /big)
bypassed=$(stats "$M" .readCache.bypassed)
log "cold read of $MB MiB with cache_size 16M: $(by_method), $got bytes"
bound "$bypassed reads past the cache" [ "$bypassed" -eq 0 ]
bound "$gets gets for $MB MiB in 4 MiB segments" [ "$gets" -le "$MB" ]
# (the gets in the order they ended, for the log of a failure)
[ "$got" -le $((MB * 1024 * 1024)) ] || since | grep '^GET /big ' | sed 's/^/  | /' >&2
bound "the big file was fetched more than once ($got bytes)" \
	[ "$got" -le $((MB * 1024 * 1024)) ]
cmp "$NG/root/big" "$M/big"
bound "the cache holds $(stats "$M" .readCache.bytes) bytes, over its 16 MiB" \
	[ "$(stats "$M" .readCache.bytes)" -le $((16 * 1024 * 1024)) ]

# a descriptor open on a 1-byte file while the file grows to 3 MiB
# through the mount (truncate up, a rewrite): read to its end, it gives
# the whole new content. The kernel reads ahead in several requests at
# once; one that came beside the read re-pinning the new version read the
# old one's size as the end of the file and answered 0 bytes at 1 MiB -
# 1 MiB, then a silent end of file (s41-t3)
python3 - "$M" <<'PY' || fail "a reader of a file grown through the mount"
import os, sys
M = sys.argv[1]
def readall(fd):
    out, off = b"", 0
    while True:
        b = os.pread(fd, 1 << 20, off)
        if not b:
            return out
        out += b
        off += len(b)
for rnd in range(5):
    for case in ("truncate-up", "rewrite"):
        p = "%s/grow-%s-%d" % (M, case, rnd)
        with open(p, "wb") as f:
            f.write(b"q")
        fd = os.open(p, os.O_RDONLY)
        os.pread(fd, 10, 0)
        if case == "rewrite":
            with open(p, "wb") as f:
                f.write(b"N" * 3145728)
            want = b"N" * 3145728
        else:
            os.truncate(p, 3145728)
            want = b"q" + bytes(3145727)
        got = readall(fd)
        os.close(fd)
        if got != want:
            sys.exit("%s round %d: %d bytes read to the end, want %d"
                     % (case, rnd, len(got), len(want)))
PY


# a reader of a file replaced by a rename over its name (save by temp
# file and rename) of the same size and mtime: nginx's version token is
# size and mtime in seconds, the same for both, and the reader went on
# reading the new file's bytes after the old one's - one read of two
# versions (s41-t3). It reads its own version, or ESTALE.
python3 - "$M" <<'PY' || fail "a reader of a file replaced by a rename"
import os, sys
M = sys.argv[1]
p, tmp = M + "/replaced", M + "/replaced.tmp"
with open(p, "wb") as f:
    f.write(b"A" * 3145728)
st = os.stat(p)
fd = os.open(p, os.O_RDONLY)
first = os.pread(fd, 1 << 20, 0)
with open(tmp, "wb") as f:
    f.write(b"B" * 3145728)
os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
os.rename(tmp, p)
try:
    rest = os.pread(fd, 2 << 20, 1 << 20)
except OSError as e:
    rest = b""
    print("after the rename: %s" % e.strerror)
os.close(fd)
if set(first + rest) != {ord("A")}:
    sys.exit("one read of two versions: %s" % sorted(set(first + rest)))
PY
unmount_smux "$M"
kill -TERM "$NGPID" 2>/dev/null || true
wait "$NGPID" 2>/dev/null || true
