#!/usr/bin/env bash
# test_bunny.sh - a shield mount (origin: a file backend, copy: a bunny
# backend on the Bunny Storage emulator the test starts on loopback):
# cp -r, tar x, reads, rename and rm -r through the mount, a burst of 429s
# in the middle of a copy failing nothing; afterwards the emulator's zone
# holds exactly the tree the mount shows, a file written through the mount
# reads back byte for byte with curl (AccessKey header), and a fresh
# daemon shows the tree again.
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || fail "python3 missing (scripts/install-deps.sh installs it)"

# the emulator, in the foreground of a subshell, its files under $T/bn
# (its command line names $T, so the harness's cleanup stops it even when
# this test fails)
BN=$T/bn
mkdir -p "$BN"
python3 "$SMUX_REPO/tests/servers/bunny_emu.py" "$BN/port" "$BN/store" \
	edge emu-secret >"$BN/server.log" 2>&1 &
BNPID=$!
stop_emu() {
	kill -TERM "$BNPID" 2>/dev/null || true
	wait "$BNPID" 2>/dev/null || true
}
for ((i = 0; i < 200; i++)); do
	[ -s "$BN/port" ] && break
	kill -0 "$BNPID" 2>/dev/null || { cat "$BN/server.log" >&2; fail "emulator exited"; }
	sleep 0.1
done
[ -s "$BN/port" ] || fail "emulator did not start"
PORT=$(cat "$BN/port")
URL=http://127.0.0.1:$PORT
log "bunny emulator on 127.0.0.1:$PORT (pid $BNPID)"
printf 'emu-secret\n' >"$T/bunny.key"
chmod 600 "$T/bunny.key"

CONF=$T/bunny.conf
new_config "$CONF" s
cfg_mux s shield "f b"
cfg_file f "$T/f"
cfg_raw "[backend b]
type = bunny
zone = edge
region = uk
endpoint = $URL
credentials_file = $T/bunny.key
"
M=$T/mnt
mount_smux "$CONF" "$M"

S=$T/src
make_tree "$S" 2 5
cp -r "$S" "$M/copy"
# a burst of 429s while tar writes: every request still lands
curl -sf -X POST "$URL/_emu/set?burst429=10&retry_after=0" >/dev/null
(cd "$S" && tar cf "$T/t.tar" .)
mkdir "$M/untar"
tar xf "$T/t.tar" -C "$M/untar"
diff -r "$S" "$M/copy"
diff -r "$S" "$M/untar"
served=$(curl -sf "$URL/_emu/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["served429"])')
[ "$served" -ge 1 ] || fail "the 429 burst was not served"
log "cp -r and tar x through the mount match the source ($served 429s absorbed)"
# what it cost on the server (informational: requests by method)
log "2 x $(find "$S" -type f | wc -l) files written: $(curl -sf "$URL/_emu/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["by_method"])')"

head -c $((2 * 1024 * 1024)) /dev/urandom >"$T/big"
cp "$T/big" "$M/big"
cmp "$T/big" "$M/big"
cmp <(dd if="$T/big" bs=64k skip=5 count=3 2>/dev/null) \
	<(dd if="$M/big" bs=64k skip=5 count=3 2>/dev/null)
# what the mount wrote, read with curl straight from the zone
curl -sf -H "AccessKey: emu-secret" "$URL/edge/big" -o "$T/big.curl"
cmp "$T/big" "$T/big.curl"
log "a file written through the mount reads back byte for byte with curl"
# the Checksum of a file written from its start is the one the daemon
# kept while staging it; one written out of order, hashed at the put:
# the server refused none (a wrong one would be answered 400)
dd if=/dev/urandom of="$T/holes" bs=4k count=3 2>/dev/null
dd if="$T/holes" of="$M/holes" bs=4k seek=7 count=2 conv=notrunc 2>/dev/null
dd if="$T/holes" of="$M/holes" bs=4k count=1 conv=notrunc 2>/dev/null
curl -sf -H "AccessKey: emu-secret" "$URL/edge/holes" -o "$T/holes.curl"
cmp "$M/holes" "$T/holes.curl"
c400=$(curl -sf "$URL/_emu/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["checksum400"])')
[ "$c400" = 0 ] || fail "$c400 puts refused for their Checksum"

mv "$M/copy/d1/f3.dat" "$M/copy/d1/moved.dat"
cmp "$S/d1/f3.dat" "$M/copy/d1/moved.dat"
[ ! -e "$M/copy/d1/f3.dat" ] || fail "renamed file still there"
rm -r "$M/untar"
[ ! -e "$M/untar" ] || fail "rm -r left untar"

# the copy holds what the mount shows (files; empty directories may stay
# on Bunny as on any store with real directories)
snap=$T/snap
mkdir "$snap"
(cd "$M" && tar cf - --exclude=./.smux .) | tar xf - -C "$snap"
diff -r -x .smuxfs-tmp "$snap" "$T/f"
(cd "$snap" && find . -type f | sort) >"$T/want"
(cd "$BN/store/edge" && find . -type f | sort) >"$T/got"
diff "$T/want" "$T/got"
while IFS= read -r rel; do
	cmp "$snap/$rel" "$BN/store/edge/$rel"
done <"$T/want"
log "the file origin and the bunny copy both match the mount"
grep -q "emu-secret" "$M/.smux/config" && fail "the zone password is in .smux/config"

unmount_smux "$M"
mount_smux "$CONF" "$M"
(cd "$M" && tar cf - --exclude=./.smux .) | tar tf - | sort >"$T/after"
(cd "$snap" && tar cf - .) | tar tf - | sort >"$T/before"
diff "$T/before" "$T/after"
unmount_smux "$M"
stop_emu
