#!/usr/bin/env bash
# test_bunny_rename.sh - rename on a mount of one bunny backend (the Bunny
# Storage emulator, started here on loopback). Bunny has no server-side
# copy: a rename uploads the content under the new name and deletes the
# old one. The content comes from the daemon's own copy when it has one
# that is the stored version (its SHA-256 is the stored Checksum): the
# staging file of a file open through the mount, or a version held whole
# by the read cache; else the object is read (GET) first. The test counts
# the emulator's GETs around each rename and reads every renamed object
# back with curl, byte for byte:
#  - a file open for writing, renamed: no GET (its staging file);
#  - a file read whole through the mount (read cache), renamed: no GET;
#  - a cached file another client replaced (same size, other bytes)
#    before the rename: one GET, and the new name holds the new bytes;
#  - a file never read: one GET.
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
URL=http://127.0.0.1:$(cat "$BN/port")
printf 'emu-secret\n' >"$T/bunny.key"
chmod 600 "$T/bunny.key"

CONF=$T/bunny.conf
new_config "$CONF" b
cfg_raw "[backend b]
type = bunny
zone = edge
region = uk
endpoint = $URL
credentials_file = $T/bunny.key
"
M=$T/mnt
if ! mount_smux "$CONF" "$M"; then
	stop_emu
	fail "mount failed"
fi

# the emulator's count of GETs of files (listings are GETs of "dir/")
gets() {
	curl -sf "$URL/_emu/stats" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["object_gets"])'
}
# emu_put KEY FILE / emu_get KEY FILE: another client of the zone
emu_put() {
	curl -sf -X PUT -H "AccessKey: emu-secret" --data-binary "@$2" \
		"$URL/edge/$1" >/dev/null || fail "cannot put $1"
}
emu_get() {
	curl -sf -H "AccessKey: emu-secret" -o "$2" "$URL/edge/$1" ||
		fail "cannot get $1"
}
FAILS=0
# renamed NAME WANT_GETS GETS_BEFORE KEY FILE: the rename cost WANT_GETS
# GETs and KEY holds FILE's bytes
renamed() {
	local n=$(($(gets) - $3))
	emu_get "$4" "$T/got"
	cmp -s "$5" "$T/got" || { log "$1: $4 is not the content renamed"; FAILS=$((FAILS + 1)); }
	if [ "$n" != "$2" ]; then
		log "$1: $n GETs, not $2"
		FAILS=$((FAILS + 1))
	else
		log "$1: $n GETs, $4 byte for byte"
	fi
}

head -c $((1536 * 1024 + 777)) /dev/urandom >"$T/big"
head -c 4096 /dev/urandom >"$T/small1"
head -c 4096 /dev/urandom >"$T/small2"

# 1. open for writing (staging), renamed while open
g=$(gets)
exec 7>"$M/open.bin"
cat "$T/big" >&7
mv "$M/open.bin" "$M/open-moved.bin"
exec 7>&-
renamed "open file" 0 "$g" open-moved.bin "$T/big"

# 2. read whole through the mount (read cache), then renamed
emu_put cached.bin "$T/big"
cmp "$T/big" "$M/cached.bin" || fail "cached.bin reads wrong"
g=$(gets)
mv "$M/cached.bin" "$M/cached-moved.bin"
renamed "cached file" 0 "$g" cached-moved.bin "$T/big"

# 3. cached, then replaced by another client: the copy is stale
emu_put stale.bin "$T/small1"
cmp "$T/small1" "$M/stale.bin" || fail "stale.bin reads wrong"
emu_put stale.bin "$T/small2"
g=$(gets)
mv "$M/stale.bin" "$M/stale-moved.bin"
renamed "stale cache" 1 "$g" stale-moved.bin "$T/small2"

# 4. never read: GET + PUT
emu_put cold.bin "$T/small1"
g=$(gets)
mv "$M/cold.bin" "$M/cold-moved.bin"
renamed "no local copy" 1 "$g" cold-moved.bin "$T/small1"

for k in open.bin cached.bin stale.bin cold.bin; do
	[ ! -e "$M/$k" ] || { log "$k still there"; FAILS=$((FAILS + 1)); }
	code=$(curl -s -o /dev/null -w '%{http_code}' -H "AccessKey: emu-secret" "$URL/edge/$k")
	[ "$code" = 404 ] || { log "the zone still has $k ($code)"; FAILS=$((FAILS + 1)); }
done

unmount_smux "$M"
stop_emu
[ "$FAILS" = 0 ] || fail "$FAILS checks failed"
log "renames from the staging file and the read cache sent no GET"
