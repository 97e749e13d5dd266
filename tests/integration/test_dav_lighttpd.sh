#!/usr/bin/env bash
# test_dav_lighttpd.sh - an `http` backend on lighttpd's mod_webdav
# (Debian 12: 1.4.69) used as programs use a disk (found by an outside
# tester, s44-t2): lighttpd answers 204 to a PROPPATCH of smuxfs's two
# properties (mtime and mode) and keeps only the first, so every file
# created with a mode (install -m 755, open(O_CREAT, 0755), git checkout
# of a script) showed 0644 - git clone then listed every script as
# modified. The put's PROPFIND now notices a property the server did not
# keep, sets it alone, and the backend sends one property per PROPPATCH
# from then on. And a time set on a closed file (rsync -a) rewrote it with
# the mode of lighttpd's GET answer, which carries no property: 0644. And
# a name with a tab, which lighttpd refuses, looked written.
. "$(dirname "$0")/lib.sh"

start_lighttpd_dav "$T/lt"
new_config "$T/c.conf" d
cfg_raw "[backend d]
type = http
url = $DAV_URL/
"
M=$T/mnt
mount_smux "$T/c.conf" "$M"

# first, files created side by side with a mode: the puts that sent both
# properties before the first of them learned that lighttpd keeps one
# each check their own (a check skipped once another had learned it left
# 0644 files)
seq 1 32 | timeout 60 xargs -P 8 -I{} install -m 755 /bin/true "$M/par{}" ||
	fail "parallel install -m 755"
unmount_smux "$M" # what the server keeps, not the daemon's memory
mount_smux "$T/c.conf" "$M"
bad=$(cd "$M" && stat -c '%n %a' par* | grep -v ' 755$' || true)
[ -z "$bad" ] || fail "parallel install -m 755 left: $(echo "$bad" | tr '\n' ' ')"

install -m 755 /bin/true "$M/script"
[ "$(stat -c %a "$M/script")" = 755 ] || fail "install -m 755: mode $(stat -c %a "$M/script")"
python3 - "$M/x" <<'PY' || fail "open(O_CREAT, 0750)"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o750)
os.write(fd, b"#!/bin/sh\n")
os.close(fd)
PY
[ "$(stat -c %a "$M/x")" = 750 ] || fail "open(O_CREAT, 0750): mode $(stat -c %a "$M/x")"
# a time set on a closed file rewrites it (the backend has no setattr):
# the rewrite took the GET's default mode, 0644 (rsync -a's files)
python3 - "$M/y" <<'PY' || fail "utime of a closed 0600 file"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, b"y\n")
os.close(fd)
os.utime(sys.argv[1], (1000000000, 1000000000))
PY
[ "$(stat -c '%a %Y' "$M/y")" = "600 1000000000" ] ||
	fail "utime of a closed 0600 file: $(stat -c '%a %Y' "$M/y")"

# a tree with modes and times: cp -a keeps both, a second rsync -a finds
# nothing to do
S=$T/src
mkdir -p "$S/bin" "$S/doc"
for i in 1 2 3; do
	echo "run $i" >"$S/bin/r$i"
	echo "doc $i" >"$S/doc/d$i"
done
chmod 755 "$S/bin/r1" "$S/bin/r2"
chmod 600 "$S/doc/d1"
chmod 751 "$S/bin/r3"
touch -d @1000000000 "$S/doc/d2"
timeout 60 cp -a "$S" "$M/copy" || fail "cp -a"
listing() { (cd "$1" && find . -type f -printf '%P %m %T@\n' | sort); }
diff <(listing "$S") <(listing "$M/copy") >&2 || fail "modes or times of cp -a differ from the source"
timeout 60 rsync -a "$S/" "$M/rs/" || fail "rsync -a"
changed=$(timeout 60 rsync -ai --dry-run "$S/" "$M/rs/" | grep '^[<>ch.]f' || true)
[ -z "$changed" ] || fail "a second rsync -a would copy files again: $changed"
# a name lighttpd refuses (400 to a tab) fails at the open, also in a
# directory the mount made (whose names it knows: no lookup asked the
# server, and only the close failed, which a shell's `>` never checks)
mkdir "$M/sub"
tab=$(printf 'a\tb')
rc=0
{ echo hi >"$M/sub/$tab"; } 2>/dev/null || rc=$?
[ "$rc" != 0 ] || [ -e "$M/sub/$tab" ] ||
	fail "echo > 'a<TAB>b' exited 0 and left no file"
unmount_smux "$M"
mount_smux "$T/c.conf" "$M"
diff <(listing "$S") <(listing "$M/copy") >&2 || fail "modes or times differ after a remount"
[ "$(stat -c %a "$M/script")" = 755 ] || fail "script after a remount: mode $(stat -c %a "$M/script")"
log "modes and times kept on lighttpd"
unmount_smux "$M"
stop_net_servers
