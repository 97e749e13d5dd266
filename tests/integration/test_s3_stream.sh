#!/usr/bin/env bash
# test_s3_stream.sh - the s3 writer through a mount of one s3 backend on an
# s3rver this test starts on loopback (issue 10, item 2):
#  - a file written in order sends its parts while it is still open: the
#    part PUTs are in s3rver's log (FORCE_COLOR=1 keeps method and URL)
#    while the file is open in the one process that wrote it (any close,
#    even of a dup, flushes and commits); after close the object is
#    byte-exact (a GET of the object itself, and a read through a fresh
#    mount), with the mode it was created with, and the upload journal is
#    empty;
#  - rewrites into parts already sent, then fsync, rename while open,
#    more writes and close: every byte is there under the new name (the
#    writer reopened after a rename stages: s3 streams only files that
#    start empty);
#  - a file opened without O_TRUNC (an append) is staged as before and
#    keeps its old bytes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/req_log.sh"

B=smux-stream
start_logged_s3rver "$B"

CONF=$T/s3.conf
new_config "$CONF" s
cfg_raw "[backend s]
type = s3
endpoint = $EP
bucket = $B
credentials_env = S3T
part_size = 5M
part_parallel = 2
multipart_threshold = 5M
"
export S3T_ACCESS_KEY_ID=S3RVER S3T_SECRET_ACCESS_KEY=S3RVER
M=$T/mnt
if ! mount_smux "$CONF" "$M"; then
	stop_s3
	fail "mount failed"
fi
done_all() {
	unmount_smux "$M"
	stop_s3
}

head -c $((17 << 20)) /dev/urandom >"$T/src"

# 1. streamed while open: one process writes 16 MiB and, the file still
# open (no close, so no flush has committed anything), waits for 3 part
# PUTs in s3rver's log
python3 - "$M/big" "$T/src" "$SLOG" "/$B/big?partNumber=" <<'EOF' || { done_all; fail "big: parts not sent while open"; }
import os, re, sys, time
path, src, slog, url = sys.argv[1:5]
data = open(src, "rb").read()[:16 << 20]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
for off in range(0, len(data), 1 << 20):
    os.pwrite(fd, data[off:off + (1 << 20)], off)
n = 0
for _ in range(300):
    text = re.sub(r"\x1b\[[0-9;]*m", "", open(slog, errors="replace").read())
    n = sum(1 for line in text.splitlines()
            if line.startswith("info: PUT " + url) and " 200 " in line)
    if n >= 3:
        break
    time.sleep(0.1)
print("big: %d part PUTs while open" % n)
os.close(fd)
sys.exit(0 if n >= 3 else 1)
EOF
head -c $((16 << 20)) "$T/src" >"$T/want"
cmp "$M/big" "$T/want" || { done_all; fail "big differs through the mount"; }
curl -sf "$EP/$B/big" -o "$T/got" || { done_all; fail "cannot GET big"; }
cmp "$T/got" "$T/want" || { done_all; fail "the object big differs"; }
[ "$(stat -c %a "$M/big")" = 640 ] || { done_all; fail "big has mode $(stat -c %a "$M/big")"; }
left=$(find "$T/state" -path '*s3-uploads*' -type f | wc -l)
[ "$left" -eq 0 ] || { done_all; fail "$left uploads left in the journal"; }

# 2. rewrites of sent parts, fsync, rename while open, more writes
python3 - "$M/r" "$M/r2" "$T/src" "$T/want2" <<'EOF' || { done_all; fail "rewrite/rename run failed"; }
import os, sys
path, moved, src, want = sys.argv[1:5]
data = bytearray(open(src, "rb").read())
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
ref = bytearray(data[:12 << 20])
for off in range(0, len(ref), 1 << 20):
    os.pwrite(fd, bytes(ref[off:off + (1 << 20)]), off)
for off, n in ((7, 100), ((5 << 20) - 10, 40), ((8 << 20) + 3, 5000)):
    chunk = bytes(reversed(ref[off:off + n]))
    os.pwrite(fd, chunk, off)
    ref[off:off + n] = chunk
os.fsync(fd)
os.rename(path, moved)
tail = bytes(data[12 << 20:])
os.pwrite(fd, tail, len(ref))
ref += tail
os.close(fd)
open(want, "wb").write(ref)
EOF
cmp "$M/r2" "$T/want2" || { done_all; fail "r2 differs through the mount"; }
[ ! -e "$M/r" ] || { done_all; fail "r still there after the rename"; }

# 3. an append (no O_TRUNC) keeps the old bytes
printf 'more' >>"$M/big"
{ cat "$T/want"; printf 'more'; } >"$T/want3"
cmp "$M/big" "$T/want3" || { done_all; fail "append to big lost bytes"; }

# a fresh mount reads what the objects hold
unmount_smux "$M"
mount_smux "$CONF" "$M" || { stop_s3; fail "remount failed"; }
cmp "$M/big" "$T/want3" || { done_all; fail "big differs after remount"; }
cmp "$M/r2" "$T/want2" || { done_all; fail "r2 differs after remount"; }
done_all
log "ok"
