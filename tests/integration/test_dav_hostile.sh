#!/usr/bin/env bash
# test_dav_hostile.sh - an http (WebDAV) backend on a server that
# misbehaves as servers seen in the wild do (tests/servers/dav_hostile.py,
# by top-level directory), alone and in a mirror with a file member:
#   - cut/: a PUT answered 201 that kept half the body, and lost/: one
#     that kept nothing, fail the close (EIO); both were acknowledged, the
#     file left half there or gone;
#   - locked/: a DELETE or MOVE answered 207 whose response says 423
#     Locked fails rm and mv; both succeeded with nothing changed, and a
#     mirror's replicas went apart with no hint to replay;
#   - noetag/: GETs without ETag or Last-Modified (lighttpd's mod_webdav)
#     read the file; every read was ESTALE.
# (outside tester s40-t2)
. "$(dirname "$0")/lib.sh"

start_script_server dav_hostile.py
M=$T/mnt

# cfg_dav NAME: the scripted server as backend NAME
cfg_dav() {
	cfg_raw "[backend $1]
type = http
url = http://127.0.0.1:$SCRIPT_PORT/
"
}

# alone: a mux of one member, back from a failure's cooldown in 50 ms
# (each refusal below takes it down, as any failed call does)
new_config "$T/alone.conf" m
cfg_mux m failover d cooldown=50ms max_cooldown=50ms
cfg_dav d
mount_smux "$T/alone.conf" "$M"
mkdir "$M/cut" "$M/lost" "$M/locked" "$M/noetag" "$M/ok"
head -c 100000 /dev/urandom >"$T/data"
for d in cut lost; do
	rc=0
	timeout 30 cp "$T/data" "$M/$d/f" 2>"$T/err" || rc=$?
	[ "$rc" -ne 0 ] || fail "$d/: a put the server did not keep was acknowledged"
	grep -q "Input/output error" "$T/err" || fail "$d/: $(cat "$T/err")"
	sleep 0.2
done
grep -q 'put "cut/f": the server holds 50000 bytes of the 100000 sent' \
	"$T/smuxfs.1.log" || fail "no log line says what the server kept of cut/f"
echo one >"$M/locked/one"
echo two >"$M/locked/two"
rc=0
timeout 30 rm "$M/locked/one" 2>/dev/null || rc=$?
[ "$rc" -ne 0 ] || fail "rm of a locked file succeeded"
sleep 0.2
rc=0
timeout 30 mv "$M/locked/two" "$M/locked/three" 2>/dev/null || rc=$?
[ "$rc" -ne 0 ] || fail "mv of a locked file succeeded"
sleep 0.2
[ "$(ls "$M/locked" | tr '\n' ' ')" = "one two " ] ||
	fail "locked/ lists $(ls "$M/locked" | tr '\n' ' ')"
cp "$T/data" "$M/noetag/f"
cmp "$T/data" "$M/noetag/f" || fail "noetag/f does not read back"
cp "$T/data" "$M/ok/f"
cmp "$T/data" "$M/ok/f" || fail "ok/f does not read back"
unmount_smux "$M"
log "alone: cut and lost puts EIO, locked rm and mv fail, noetag reads"

# a mirror with a file member: the replicas never go apart silently
new_config "$T/mirror.conf" m
cfg_mux m mirror "f d" cooldown=50ms max_cooldown=50ms
cfg_file f "$T/f"
cfg_dav d
mkdir -p "$T/f/locked" "$T/f/ok"
mount_smux "$T/mirror.conf" "$M"
echo a >"$M/locked/a"
echo b >"$M/locked/b"
rm "$M/locked/a" 2>/dev/null || true
sleep 0.2
mv "$M/locked/b" "$M/locked/c" 2>/dev/null || true
pending=$(stats "$M" .pendingHints)
for k in a b c; do
	inf=$([ -e "$T/f/locked/$k" ] && echo y || echo n)
	ind=$(curl -s -o /dev/null -w '%{http_code}' -X PROPFIND \
		-H 'Depth: 0' "http://127.0.0.1:$SCRIPT_PORT/locked/$k")
	ind=$([ "$ind" = 207 ] && echo y || echo n)
	[ "$inf" = "$ind" ] || [ "$pending" -gt 0 ] ||
		fail "locked/$k: file replica $inf, WebDAV $ind, and no hint pending"
done
unmount_smux "$M"
log "mirror: a refused rm or mv leaves the replicas alike or hinted"

# portal/: GETs answered 200 with an HTML page without validators, on a
# failover [d, f] whose f holds the same file (its mtime the server's, to
# the second): the read goes to f. Every read was EIO ("not its
# content") and f was never asked (s43-t2).
curl -sf -X MKCOL "http://127.0.0.1:$SCRIPT_PORT/portal/" >/dev/null
curl -sf -T "$T/data" "http://127.0.0.1:$SCRIPT_PORT/portal/f" >/dev/null
lm=$(curl -sfI "http://127.0.0.1:$SCRIPT_PORT/portal/f" |
	sed -n 's/^Last-Modified: *//Ip' | tr -d '\r')
mkdir -p "$T/pf"
cp "$T/data" "$T/pf/f"
touch -d "$lm" "$T/pf/f"
new_config "$T/portal.conf" m read_cache=off
cfg_mux m failover "d f"
cfg_raw "[backend d]
type = http
url = http://127.0.0.1:$SCRIPT_PORT/portal/
"
cfg_file f "$T/pf"
mount_smux "$T/portal.conf" "$M"
timeout 30 cmp "$T/data" "$M/f" || fail "portal: f not read from the file member"
unmount_smux "$M"

# plain/: no getetag, GETs without validators: a file another client
# replaced (another size) while a reader reads it is ESTALE for the
# reader, as a told change is - not EIO, which the check for a wrong
# page above first made of it (s43-t3)
new_config "$T/plain.conf" d read_cache=off
cfg_raw "[backend d]
type = http
url = http://127.0.0.1:$SCRIPT_PORT/plain/
"
curl -sf -X MKCOL "http://127.0.0.1:$SCRIPT_PORT/plain/" >/dev/null
mount_smux "$T/plain.conf" "$M"
head -c 400000 /dev/zero | tr '\0' A >"$M/f"
got=$(timeout 30 python3 - "$M/f" "http://127.0.0.1:$SCRIPT_PORT/plain/f" <<'PY'
import errno, os, sys, urllib.request
fd = os.open(sys.argv[1], os.O_RDONLY)
os.pread(fd, 10, 0)
urllib.request.urlopen(urllib.request.Request(
    sys.argv[2], data=b"B" * 500000, method="PUT")).read()
try:
    b = os.pread(fd, 100, 300000)
    print("read", b[:3].decode(), len(b))
except OSError as e:
    print(errno.errorcode[e.errno])
PY
)
[ "$got" = ESTALE ] || fail "plain: a reader of a file replaced behind the mount: $got"
unmount_smux "$M"
kill "$SCRIPT_PID"
log "failover: a 200 page without validators from d, the read served by f"
log "plain: a file replaced behind the mount is ESTALE for its reader"
