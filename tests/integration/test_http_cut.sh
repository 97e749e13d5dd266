#!/usr/bin/env bash
# test_http_cut.sh - a plain HTTP mirror (webdav = false, no read cache)
# of a server that sends a file's GET as a 200 without Content-Length,
# cut to half, then closes (tests/servers/http_script.py /cut200-N; its
# HEAD says the whole size): nothing in the answer says it is short, and
# libcurl reports success. cat fails (EIO), never a short file with exit
# 0: the read refuses fewer bytes of the pinned version than it holds
# (ops_io.c; the kernel takes a short read for the end of the file).
. "$(dirname "$0")/lib.sh"

start_script_server http_script.py
new_config "$T/c.conf" h
cfg_raw "[backend h]
type = http
url = http://127.0.0.1:$SCRIPT_PORT/
webdav = false
"
M=$T/mnt
mount_smux "$T/c.conf" "$M" "read_cache=off"
[ "$(stat -c %s "$M/cut200-300000")" = 300000 ] || fail "the size HEAD gives: $(stat -c %s "$M/cut200-300000")"
if cat "$M/cut200-300000" >"$T/got" 2>"$T/err"; then
	fail "cat of a body cut to $(stat -c %s "$T/got") of 300000 bytes exited 0"
fi
grep -q "Input/output error" "$T/err" || fail "cat: $(cat "$T/err"), not EIO"
unmount_smux "$M"
kill "$SCRIPT_PID"
log "a body cut short without Content-Length: EIO"
