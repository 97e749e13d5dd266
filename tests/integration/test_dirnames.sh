#!/usr/bin/env bash
# test_dirnames.sh KIND - lookups of names a directory does not have cost
# no request when the daemon knows the directory's complete list of names
# (dirnames.c, issue 10's untar row), on an object store: KIND s3 (an
# s3rver this test starts; requests counted from its log, a marker request
# after each step) or bunny (the Bunny Storage emulator; requests counted
# from its /_emu/stats).
#
#   - mkdir d; tar -x of N files into it: no request that finds a name
#     absent (S3: HEAD 404; Bunny: DESCRIBE) and no listing per file
#     (main: 2 HEAD 404 and a listing per file on S3);
#   - the mount's own changes in a known directory show at once (rm, mv,
#     ln -s, mkdir, a create), and what tar wrote reads back;
#   - a file made behind the mount (on the server) in a known directory
#     shows once dir_cache_timeout has passed;
#   - dir_cache_timeout = 0: every such lookup asks again (the old
#     behaviour), and a file made behind the mount shows at once.
#
# The kernel keeps no names (entry and negative timeouts 0): every lookup
# reaches the daemon, so the counts show the daemon's own answers.
. "$(dirname "$0")/lib.sh"

KIND=${1:-s3}
N=${DIRNAMES_N:-100}

case $KIND in
s3)
	S3D=$T/s3rver
	FORCE_COLOR=1 "$SMUX_REPO/tests/servers/s3rver.sh" start "$S3D" >/dev/null ||
		fail "s3rver did not start"
	stop_server() { "$SMUX_REPO/tests/servers/s3rver.sh" stop "$S3D" >/dev/null 2>&1 || true; }
	EP=$(sed -n 's/^S3_ENDPOINT=//p' "$S3D/env")
	SLOG=$S3D/log/s3rver.log
	B=smux-dn
	curl -sf -X PUT "$EP/$B" >/dev/null || fail "cannot create bucket"
	export S3T_ACCESS_KEY_ID=S3RVER S3T_SECRET_ACCESS_KEY=S3RVER
	backend="[backend s]
type = s3
endpoint = $EP
bucket = $B
credentials_env = S3T
"
	# put_behind KEY: an object made on the server, not through the mount
	put_behind() { curl -sf -X PUT --data-binary behind "$EP/$B/$1" >/dev/null; }
	# "MISSES LISTINGS" of the request lines $1+1 to $2 (colours off)
	lines() { sed 's/\x1b\[[0-9;]*m//g' "$SLOG" |
		awk '$1 == "info:" && $2 ~ /^[A-Z]+$/ && $4 ~ /^[0-9][0-9][0-9]$/ { print $2, $3, $4 }'; }
	# counters: "REQUESTS MISSES LISTINGS" so far, once a marker request
	# is in the log (s3rver logs a request when its answer is sent); a
	# miss is a HEAD 404 of a file's name (f1..fN, none1..): the lookups
	# of the directories tar makes ask "t" before "t/", and those have
	# been looked up, not absent
	MAXMISS=2
	counters() {
		local m i
		m=/smux-marker/m$(date +%s%N)
		curl -s -o /dev/null "$EP$m" || true
		for ((i = 0; i < 200; i++)); do
			lines | grep -q " $m " && break
			sleep 0.05
		done
		lines | awk -v m="$m" '$2 == m { exit }
			{ n++ } $1 == "HEAD" && $3 == "404" && $2 ~ /\/(f[0-9]+|none[0-9]+)\/?$/ { miss++ }
			$1 == "GET" && $2 ~ /[?&]prefix=/ { list++ }
			END { printf "%d %d %d\n", n, miss, list }'
	}
	;;
bunny)
	start_bunny_emu "$T/bn" zone emu-secret
	stop_server() { kill -TERM "$BUNNY_PID" 2>/dev/null || true; }
	backend="[backend s]
type = bunny
zone = zone
region = uk
endpoint = $BUNNY_URL
credentials_file = $T/bn/key
"
	put_behind() { curl -sf -X PUT -H "AccessKey: emu-secret" \
		--data-binary behind "$BUNNY_URL/zone/$1" >/dev/null; }
	# counters: "REQUESTS MISSES LISTINGS" so far (a DESCRIBE is how a
	# lookup asks for a name; a GET that is no object's is a listing).
	# The emulator counts by method: a DESCRIBE of a directory that is
	# there counts too (tar's chmod and utimens of its directories,
	# about 10), so the bound is "not one per file"
	MAXMISS=$((N / 5))
	counters() {
		curl -sf "$BUNNY_URL/_emu/stats" | jq -r '[.requests,
			(.by_method.DESCRIBE // 0),
			((.by_method.GET // 0) - (.object_gets // 0))] | @tsv'
	}
	;;
*) fail "usage: test_dirnames.sh s3|bunny" ;;
esac

# delta BEFORE AFTER: "REQUESTS MISSES LISTINGS" between two counters
delta() {
	local a b
	read -r -a a <<<"$1"
	read -r -a b <<<"$2"
	echo "$((b[0] - a[0])) $((b[1] - a[1])) $((b[2] - a[2]))"
}

# mount_kind NAME TIMEOUT: a mount of the one backend, dir_cache_timeout
# TIMEOUT, at $T/NAME; directories' attributes are kept an hour
# (dircache.c: a lookup of a directory that is there is no miss)
mount_kind() {
	new_config "$T/$1.conf" s entry_timeout=0 negative_timeout=0 \
		attr_timeout=3600 "dir_cache_timeout=$2"
	cfg_raw "$backend"
	mount_smux "$T/$1.conf" "$T/$1"
}

# untar_counted DIR: tar -x of the tree into DIR (made here) through the
# mount; sets reqs, miss and list to what it cost, logs them (with $1 as
# what the mount is) and checks what tar wrote
untar_counted() {
	local c0
	mkdir "$2"
	c0=$(counters)
	tar -C "$2" -xf "$T/t.tar"
	read -r reqs miss list <<<"$(delta "$c0" "$(counters)")"
	log "$KIND: $1: tar -x of $N files into a new directory: $reqs requests, $miss misses, $list listings"
	diff -r "$S" "$2/t" || fail "$1: what tar wrote differs"
}

S=$T/src/t
mkdir -p "$S/sub"
for ((i = 1; i <= N; i++)); do printf 'file %d\n' "$i" >"$S/f$i"; done
printf 'deep\n' >"$S/sub/g"
tar -C "$T/src" -cf "$T/t.tar" t

# ---- known directories: no request for names they do not have ----
mount_kind m 3600s
M=$T/m
untar_counted "dir_cache_timeout 1h" "$M/d"
[ "$miss" -le "$MAXMISS" ] || fail "tar -x of $N files: $miss lookups asked for absent names"
[ "$list" -le 3 ] || fail "tar -x of $N files: $list listings"

# a directory listed is known too
ls "$M/d/t" >/dev/null
c0=$(counters)
for i in 1 2 3 4 5 6 7 8 9 10; do
	[ ! -e "$M/d/t/none$i" ] || fail "d/t/none$i exists"
done
read -r reqs miss list <<<"$(delta "$c0" "$(counters)")"
log "$KIND: 10 absent names in a listed directory: $reqs requests"
[ "$miss" -le "$((MAXMISS / 10))" ] && [ "$list" -le 0 ] ||
	fail "10 absent names in a listed directory: $miss misses, $list listings"

# the mount's own changes show at once
rm "$M/d/t/f1"
[ ! -e "$M/d/t/f1" ] || fail "d/t/f1 still there after rm"
mv "$M/d/t/f2" "$M/d/t/g2"
[ ! -e "$M/d/t/f2" ] && [ "$(cat "$M/d/t/g2")" = "file 2" ] || fail "mv f2 g2"
mv "$M/d/t/f3" "$M/d/t/sub/f3"
[ ! -e "$M/d/t/f3" ] && [ "$(cat "$M/d/t/sub/f3")" = "file 3" ] || fail "mv f3 sub/f3"
if [ "$KIND" = s3 ]; then # Bunny Storage keeps no symlinks
	ln -s g2 "$M/d/t/l2"
	[ "$(cat "$M/d/t/l2")" = "file 2" ] || fail "symlink l2"
fi
mkdir "$M/d/t/new"
[ -d "$M/d/t/new" ] || fail "mkdir d/t/new not shown"
printf 'x\n' >"$M/d/t/new/x"
[ "$(cat "$M/d/t/new/x")" = x ] || fail "d/t/new/x"
mv "$M/d/t/new" "$M/d/t/moved"
[ ! -e "$M/d/t/new" ] && [ "$(cat "$M/d/t/moved/x")" = x ] || fail "mv new moved"
rm "$M/d/t/moved/x"
rmdir "$M/d/t/moved"
[ ! -e "$M/d/t/moved" ] || fail "rmdir moved"
mkdir "$M/d/t/moved"
[ -d "$M/d/t/moved" ] && [ ! -e "$M/d/t/moved/x" ] || fail "mkdir moved again"
ls "$M/d/t" | grep -qx g2 || fail "g2 not listed"

# behind the mount, in a known directory: not seen within the timeout
# (3600 s here: the daemon answers from what it knows)
put_behind d/t/behind
[ ! -e "$M/d/t/behind" ] ||
	fail "d/t/behind made behind the mount seen in a known directory"
unmount_smux "$M"

# ---- a short timeout: what another client made shows after it ----
mount_kind b 2s
M=$T/b
mkdir "$M/e"
[ ! -e "$M/e/x" ] || fail "e/x"
put_behind e/behind
t0=$SECONDS
until [ -e "$M/e/behind" ]; do
	[ $((SECONDS - t0)) -lt 30 ] || fail "e/behind not seen 30 s after it was made"
	sleep 0.2
done
log "$KIND: made behind the mount, seen after $((SECONDS - t0)) s (dir_cache_timeout 2s)"
[ "$(cat "$M/e/behind")" = behind ] || fail "e/behind reads wrong"
# ... and d/t/behind too (the other mount's knowledge is not this one's)
[ -e "$M/d/t/behind" ] || fail "d/t/behind not seen by a new mount"
# a directory only a key two levels down implies is in its parent's
# listing, so a listed directory's names have it (s3rver had to be fixed
# for that: tests/servers/s3rver.sh)
put_behind g/x
put_behind g/deep/er/k
# (g itself is new to the mount: the root's listing may be cached for
# dir_cache_timeout - a CI run looked g up 1 s after it was made: ENOENT)
t0=$SECONDS
until [ -d "$M/g" ]; do
	[ $((SECONDS - t0)) -lt 30 ] || fail "g not seen 30 s after it was made"
	sleep 0.2
done
ls "$M/g" | grep -qx deep || fail "g/deep (implied by g/deep/er/k) not listed"
[ "$(cat "$M/g/deep/er/k")" = behind ] || fail "g/deep/er/k after ls g"
unmount_smux "$M"

# ---- dir_cache_timeout = 0: as before ----
mount_kind z 0
M=$T/z
untar_counted "dir_cache_timeout 0" "$M/f"
[ "$miss" -ge "$N" ] || fail "dir_cache_timeout 0: only $miss misses for $N files"
ls "$M/f/t" >/dev/null
put_behind f/t/behind
[ -e "$M/f/t/behind" ] || fail "dir_cache_timeout 0: f/t/behind not seen at once"
unmount_smux "$M"
stop_server
log "$KIND: absent names in known directories cost no request"
