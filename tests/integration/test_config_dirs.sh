#!/usr/bin/env bash
# test_config_dirs.sh - the local directories of one mount must not
# overlap, and a config where they do is refused before anything in them
# is touched:
#   - cache_dir set to a file backend's path: the daemon empties
#     cache_dir/read at start (the read cache of one run), so a user's
#     directory "read" at the top of the tree lost its files;
#   - two file backends on one directory (a trailing "/", a symlink or a
#     bind mount apart): every append through a mirror was made twice (a
#     mux that writes one member, round-robin, may still pool one
#     directory);
#   - a backend inside another's directory, state_dir inside a backend,
#     a backend that holds the mount point, one under the mount point;
#   - at run time, `add` and a reload of such a backend are refused and
#     change nothing.
#   - --check-config of a file backend whose path is missing or a
#     regular file fails naming the key (the mount would).
# Each refusal names the file, the line, both keys and the directory.
. "$(dirname "$0")/lib.sh"

M=$T/mnt
mkdir -p "$M"

# refused CONFIG WANT...: the daemon exits non-zero without mounting and
# its message holds every WANT
refused() {
	local cfg=$1 out rc=0 w
	shift
	out=$(timeout 60 env "${SMUX_SAN_ENV[@]}" "$SMUXFS" "$cfg" "$M" -f 2>&1 </dev/null) || rc=$?
	if mountpoint -q "$M"; then
		fusermount3 -u "$M" || umount -l "$M"
		fail "$cfg was mounted (it must be refused)"
	fi
	[ "$rc" -ne 0 ] || fail "$cfg: the daemon exited 0 without a mount: $out"
	for w in "$@"; do
		grep -qF -- "$w" <<<"$out" || fail "$cfg: message lacks '$w': $out"
	done
	log "refused: $(head -n 1 <<<"$out")"
}

log "--- cache_dir on a backend's directory: refused, the tree untouched"
mkdir -p "$T/a/read" "$T/b"
echo precious >"$T/a/read/important"
new_config "$T/cache.conf" m
sed -i "s|^cache_dir = .*|cache_dir = $T/a|" "$CFG"
cfg_mux m mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
refused "$CFG" "$CFG:3: [mount] cache_dir: $T/a" "[backend a] path" "line 12"
[ "$(cat "$T/a/read/important")" = precious ] || fail "a/read/important was deleted"
[ ! -e "$T/a/staging" ] || fail "the refused mount made $T/a/staging"
# --check-config reports it too (it needs no mount point)
out=$("$SMUXFS" --check-config "$CFG" 2>&1) && fail "--check-config passed $CFG"
grep -qF "[mount] cache_dir" <<<"$out" || fail "--check-config: $out"

log "--- --check-config of a file backend whose path is missing or a file"
touch "$T/plainfile"
keep=$CFG
for p in "$T/missing" "$T/plainfile"; do
	new_config "$T/path.conf" m
	cfg_raw "[backend m]
type = file
path = $p"
	out=$("$SMUXFS" --check-config "$CFG" 2>&1) && fail "--check-config passed a path of $p"
	grep -qF "[backend m] path: $p:" <<<"$out" || fail "--check-config of path $p: $out"
done
CFG=$keep

log "--- cache_dir above a backend: refused"
sed -i "s|^cache_dir = .*|cache_dir = $T/c2|; s|^path = $T/b\$|path = $T/c2/read|" "$CFG"
mkdir -p "$T/c2/read"
echo precious >"$T/c2/read/kept"
refused "$CFG" "[backend b] path: $T/c2/read" "[mount] cache_dir $T/c2 (line 3)"
[ "$(cat "$T/c2/read/kept")" = precious ] || fail "c2/read/kept was deleted"

log "--- two backends on one directory: refused"
new_config "$T/same.conf" m
cfg_mux m mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/a/"
refused "$T/same.conf" "$T/same.conf:16: [backend b] path: $T/a/" \
	"the directory of [backend a] path $T/a (line 12)"
ln -sfn "$T/a" "$T/alias"
new_config "$T/alias.conf" m
cfg_mux m mirror "a b"
cfg_file a "$T/a"
_cfg_section "backend b" "type=file" "path=$T/alias"
refused "$T/alias.conf" "[backend b] path: $T/alias" "[backend a] path $T/a"
# a bind mount of the same directory (lib.sh's cleanup unmounts what is
# left mounted under $T)
mkdir -p "$T/bound"
mount --bind "$T/a" "$T/bound" || fail "mount --bind $T/a $T/bound"
new_config "$T/bind.conf" m
cfg_mux m mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/bound"
refused "$T/bind.conf" "[backend b] path: $T/bound is the directory of [backend a] path $T/a"
umount "$T/bound"

# a mux that writes one member may take one directory twice (a pool of
# identical copies, as test_programs models round-robin and weighted)
new_config "$T/pool.conf" m
cfg_mux m round-robin "a b"
cfg_file a "$T/a"
cfg_file b "$T/a/"
"$SMUXFS" --check-config "$T/pool.conf" >/dev/null || fail "a round-robin pool of one directory was refused"

log "--- a backend inside another, behind a faulty wrapper and a nested mux"
mkdir -p "$T/a/sub"
new_config "$T/nest.conf" m
cfg_mux m mirror "a f"
cfg_file a "$T/a"
cfg_faulty f inner
cfg_mux inner failover "s"
cfg_file s "$T/a/sub"
refused "$T/nest.conf" "[backend s] path: $T/a/sub" "inside [backend a] path $T/a"

log "--- state_dir inside a backend: refused"
new_config "$T/state.conf" m
sed -i "s|^state_dir = .*|state_dir = $T/b/.state|" "$T/state.conf"
cfg_mux m mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
refused "$T/state.conf" "[mount] state_dir: $T/b/.state" "[backend b] path $T/b"
[ ! -e "$T/b/.state" ] || fail "the refused mount made $T/b/.state"
# and from -o (no line: the option is named)
refused_o() {
	local out rc=0
	out=$(timeout 60 "$SMUXFS" "$T/same.conf" "$M" -f -o "state_dir=$T/a/st" 2>&1 </dev/null) || rc=$?
	mountpoint -q "$M" && { fusermount3 -u "$M"; fail "-o state_dir inside a backend was mounted"; }
	[ "$rc" -ne 0 ] && grep -qF "same.conf: state_dir: $T/a/st" <<<"$out" || fail "-o state_dir: rc $rc: $out"
}
sed -i "s|^path = $T/a/\$|path = $T/b|" "$T/same.conf"
refused_o

log "--- the mount point inside a backend, a backend under the mount point"
new_config "$T/mnt.conf" m
cfg_mux m mirror "a t"
cfg_file a "$T/a"
cfg_file t "$T/o"
mkdir -p "$T/o/mnt"
out=$(timeout 60 "$SMUXFS" "$T/mnt.conf" "$T/o/mnt" -f 2>&1 </dev/null) && fail "a backend holding the mount point was mounted"
mountpoint -q "$T/o/mnt" && fusermount3 -u "$T/o/mnt"
grep -qF "[backend t] path: $T/o holds the mount point $T/o/mnt" <<<"$out" ||
	fail "backend holding the mount point: $out"
mkdir -p "$M/under"
new_config "$T/under.conf" m
cfg_mux m mirror "a u"
cfg_file a "$T/a"
cfg_file u "$M/under"
refused "$T/under.conf" "[backend u] path: $M/under" "mount point"
rmdir "$M/under"

log "--- at run time: add and reload of an overlapping backend are refused"
new_config "$T/run.conf" m
cfg_mux m mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
cfg_file dup "$T/b/"
cfg_file inside "$T/a/sub"
cfg_file ok "$T/c"
mount_smux "$T/run.conf" "$M"
echo one >>"$M/log"
out=$( (echo "add dup" >"$M/.smux/ctl") 2>&1) && fail "add dup was accepted"
out=$( (echo "add inside" >"$M/.smux/ctl") 2>&1) && fail "add inside was accepted"
grep -q '"command":"add inside".*"result":"failed".*inside \[backend a\] path' "$M/.smux/events" ||
	fail "the refused add does not say why: $(tail -n 2 "$M/.smux/events")"
sed -i 's/^backends = a b$/backends = a b dup/' "$T/run.conf"
out=$( (echo reload >"$M/.smux/ctl") 2>&1) && fail "a reload adding dup was accepted"
[ "$(jq -c '[.backends[].name]' "$M/.smux/stats")" = '["a","b"]' ] ||
	fail "members after the refused add and reload: $(jq -c '[.backends[].name]' "$M/.smux/stats")"
echo two >>"$M/log"
[ "$(cat "$M/log")" = "$(printf 'one\ntwo')" ] || fail "log through the mount: $(cat "$M/log")"
[ "$(cat "$T/b/log")" = "$(printf 'one\ntwo')" ] || fail "log on b: $(cat "$T/b/log")"
sed -i 's/^backends = a b dup$/backends = a b ok/' "$T/run.conf"
echo reload >"$M/.smux/ctl" || fail "a reload adding ok (its own directory) was refused"
unmount_smux "$M"
log "ok"
