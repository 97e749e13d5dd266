#!/usr/bin/env bash
# test_no_eagain.sh - a file's calls through the mount never answer
# EAGAIN (found by outside testers, s44-t1 and s44-t4): a shield's origin
# drained while a program wrote a file (its writes must reach the origin,
# so they fail) answered write(2), fsync(2) and close(2) with EAGAIN
# ("Resource temporarily unavailable", STORAGE_MUX.BACKEND_DRAINING), which
# tells a program to retry a non-blocking descriptor; tar printed "Cannot
# close: Resource temporarily unavailable". They answer EIO, and the file
# holds what was acknowledged before.
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" m
cfg_mux m shield "r1 r2"
cfg_file r1 "$T/r1"
cfg_file r2 "$T/r2"
M=$T/mnt
mount_smux "$T/c.conf" "$M"

timeout 60 python3 - "$M/f" "$M/.smux/ctl" >"$T/out" 2>&1 <<'PY' || fail "the program failed: $(cat "$T/out")"
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"a" * 100000)
with open(sys.argv[2], "w") as c:
    c.write("drain r1\n")
for name, call in (("write", lambda: os.write(fd, b"b" * 100000)),
                   ("fsync", lambda: os.fsync(fd)),
                   ("close", lambda: os.close(fd))):
    try:
        call()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
with open(sys.argv[2], "w") as c:
    c.write("undrain r1\n")
PY
log "with the origin drained: $(tr '\n' ' ' <"$T/out")"
! grep -q EAGAIN "$T/out" || fail "EAGAIN through the mount: $(tr '\n' ' ' <"$T/out")"
grep -q "^write EIO" "$T/out" || fail "write with the origin drained: $(grep write "$T/out")"
repair_settled "$M" 30
[ "$(head -c 100000 "$M/f" | tr -d a | wc -c)" = 0 ] || fail "the acknowledged bytes of f are not there"
unmount_smux "$M"
