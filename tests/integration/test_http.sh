#!/usr/bin/env bash
# test_http.sh - a mirror mount of a file backend and an http (WebDAV)
# backend on an nginx the test starts on loopback: cp -r, tar x, reads,
# rename and rm -r through the mount; afterwards both replicas hold exactly
# the tree the mount shows, and a fresh daemon shows it again.
. "$(dirname "$0")/lib.sh"

NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if [ ! -x "$NGINX" ] || [ ! -f /usr/lib/nginx/modules/ngx_http_dav_ext_module.so ]; then
	log "*** SKIPPED: nginx or libnginx-mod-http-dav-ext missing (scripts/install-deps.sh installs them) ***"
	exit 0
fi

# nginx, in the foreground, everything under $T/ng (its process names $T,
# so the harness's cleanup stops it even when this test fails)
NG=$T/ng
mkdir -p "$NG/root"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -e "s#@DIR@#$NG#g; s#@ROOT@#$NG/root#g; s#@PORT@#$PORT#g" \
	-e "s#@USER@#$([ "$(id -u)" = 0 ] && echo 'user root;')#" \
	"$SMUX_REPO/tests/servers/nginx-dav.conf" >"$NG/nginx.conf"
"$NGINX" -e "$NG/server.log" -p "$NG" -c "$NG/nginx.conf" >"$NG/server.log" 2>&1 &
NGPID=$!
stop_nginx() {
	kill -TERM "$NGPID" 2>/dev/null || true
	wait "$NGPID" 2>/dev/null || true
}
for ((i = 0; i < 200; i++)); do
	curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break
	kill -0 "$NGPID" 2>/dev/null || { cat "$NG/server.log" >&2; fail "nginx exited"; }
	sleep 0.1
done
log "nginx on 127.0.0.1:$PORT (pid $NGPID)"

CONF=$T/http.conf
new_config "$CONF" m
cfg_mux m mirror "f d"
cfg_file f "$T/f"
cfg_raw "[backend d]
type = http
url = http://127.0.0.1:$PORT/
"
M=$T/mnt
mount_smux "$CONF" "$M"

# the trees: a copy of a made tree, and a tar extracted in place
S=$T/src
make_tree "$S" 3 6
cp -r "$S" "$M/copy"
(cd "$S" && tar cf "$T/t.tar" .)
mkdir "$M/untar"
tar xf "$T/t.tar" -C "$M/untar"
diff -r "$S" "$M/copy"
diff -r "$S" "$M/untar"
log "cp -r and tar x through the mount match the source"
# what it cost on the server (informational: request counts by method)
nfiles=$(find "$S" -type f | wc -l)
log "2 x $nfiles files written: $(awk '{print $6}' "$NG/access.log" | tr -d '"' | sort | uniq -c | tr '\n' ' ')"

# a larger file, streamed, and reads of its middle
head -c $((12 * 1024 * 1024)) /dev/urandom >"$T/big"
cp "$T/big" "$M/big"
cmp "$T/big" "$M/big"
cmp <(dd if="$T/big" bs=1M skip=5 count=3 2>/dev/null) \
	<(dd if="$M/big" bs=1M skip=5 count=3 2>/dev/null)

# rename (a MOVE on the server) and rm -r
mv "$M/copy/d1/f3.dat" "$M/copy/d1/moved.dat"
cmp "$S/d1/f3.dat" "$M/copy/d1/moved.dat"
[ ! -e "$M/copy/d1/f3.dat" ] || fail "renamed file still there"
rm -r "$M/untar"
[ ! -e "$M/untar" ] || fail "rm -r left untar"

# WebDAV keeps no symlinks, FIFOs or sockets (rclone_links is off here):
# the mirror refuses them as a filesystem without them does (EPERM), on
# neither replica. ln -s returned 0 with the link on f only, and d's hint
# for it stayed pending for good (no replay can store it there)
expect_fail "Operation not permitted" ln -s target "$M/link"
expect_fail "Operation not permitted" mkfifo "$M/fifo"
for r in "$T/f" "$NG/root"; do
	[ ! -e "$r/link" ] && [ ! -L "$r/link" ] && [ ! -e "$r/fifo" ] ||
		fail "a refused symlink or FIFO is on $r"
done
[ "$(stats "$M" '.pendingHints')" = 0 ] ||
	fail "hints pending after a refused ln -s: $(stats "$M" '.pendingHints')"
log "ln -s and mkfifo: EPERM, on neither replica, no hint"

# both replicas hold what the mount shows
snap=$T/snap
mkdir "$snap"
(cd "$M" && tar cf - --exclude=./.smux .) | tar xf - -C "$snap"
diff -r -x .smuxfs-tmp "$snap" "$T/f"
diff -r "$snap" "$NG/root"
log "the file replica and the WebDAV replica both match the mount"

unmount_smux "$M"
mount_smux "$CONF" "$M"
(cd "$M" && tar cf - --exclude=./.smux .) | tar tf - | sort >"$T/after"
(cd "$snap" && tar cf - .) | tar tf - | sort >"$T/before"
diff "$T/before" "$T/after"
unmount_smux "$M"

# a directory's attributes the daemon keeps (dircache.c, attr_timeout) go
# once a file is created in it: the server moved its mtime, and tar
# compares a directory's stat before and after reading it ("file changed
# as we read it" in make check)
mount_smux "$CONF" "$M" "attr_timeout=3600"
mkdir "$M/dc"
m1=$(stat -c %Y "$M/dc")
sleep 1.1 # the next second: mtimes have a one-second resolution here
echo x >"$M/dc/f"
m2=$(stat -c %Y "$M/dc")
[ "$m2" != "$m1" ] || fail "dc's mtime still $m1 after a create in it"
log "a directory's mtime moves with a create in it"
unmount_smux "$M"

# nginx's listings hide names starting with '.': a directory rename is
# one MOVE of the collection (key by key, proj/.env stayed behind and
# went with the old collection's DELETE), and a dot name a listing lacks
# is still looked up (after an ls, c/.profile answered ENOENT)
CONF2=$T/http-only.conf
new_config "$CONF2" d
cfg_raw "[backend d]
type = http
url = http://127.0.0.1:$PORT/
"
mount_smux "$CONF2" "$M"
mkdir "$M/proj" "$M/c"
echo code >"$M/proj/main.c"
echo SECRET=1 >"$M/proj/.env"
echo v >"$M/c/.profile"
mv "$M/proj" "$M/proj2" || fail "mv proj proj2"
[ "$(cat "$NG/root/proj2/.env" 2>&1)" = SECRET=1 ] ||
	fail "proj2/.env on the server: $( (ls -a "$NG/root/proj2" "$NG/root/proj" 2>&1 || true) | tr '\n' ' ')"
unmount_smux "$M"
mount_smux "$CONF2" "$M"
ls -a "$M/c" >/dev/null
[ "$(cat "$M/c/.profile" 2>&1)" = v ] ||
	fail "c/.profile after an ls of c: $(cat "$M/c/.profile" 2>&1)"
[ "$(cat "$M/proj2/.env" 2>&1)" = SECRET=1 ] || fail "proj2/.env after the remount"
log "dot names nginx does not list: moved with their directory, looked up after a listing"

# what a copy of new files costs: a PUT and the PROPFIND that checks it
# per file, plus a few for the directory. A WebDAV server keeps no owner,
# so a create asks nothing of its directory (its group matters only where
# owners are kept): a PROPFIND of the directory per file came on top, as
# the create before it had moved the directory's mtime
mkdir "$T/cpsrc"
for i in $(seq 1 30); do echo "file $i" >"$T/cpsrc/f$i"; done
: >"$NG/access.log"
cp -r "$T/cpsrc" "$M/cpdst"
diff -r "$T/cpsrc" "$M/cpdst"
puts=$(grep -c '"PUT ' "$NG/access.log" || true)
finds=$(grep -c '"PROPFIND ' "$NG/access.log" || true)
log "cp -r of 30 files: $puts PUT, $finds PROPFIND"
[ "$puts" = 30 ] || fail "cp -r of 30 files sent $puts PUTs"
[ "$finds" -le 40 ] ||
	fail "cp -r of 30 files sent $finds PROPFINDs (30 checks of a PUT and a few for the directory expected): $(awk '$6 == "\"PROPFIND" {print $7}' "$NG/access.log" | sort | uniq -c | sort -rn | head -5 | tr '\n' ' ')"

# a name the server does not have is one PROPFIND: its answer for "a"
# stands for the collection "a/" too (a second one asked for "a/"). In a
# directory made on the server, whose names the daemon does not know
mkdir "$NG/root/srvdir"
: >"$NG/access.log"
expect_fail "No such file or directory" stat "$M/srvdir/nosuch"
finds=$(grep -c '"PROPFIND /srvdir/nosuch' "$NG/access.log" || true)
[ "$finds" = 1 ] ||
	fail "a lookup of an absent name sent $finds PROPFINDs: $(awk '{print $6, $7}' "$NG/access.log" | tr '\n' ' ')"
unmount_smux "$M"
stop_nginx
