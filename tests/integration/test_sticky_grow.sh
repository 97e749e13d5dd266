#!/usr/bin/env bash
# test_sticky_grow.sh - sticky-by-key over file backends when the shard
# list grows (`add` of a new shard at run time, or a remount with a longer
# `backends` list): most keys' homes move, and each key lives on the shard
# it was written to until it is written again (docs/modes.md). A change
# that starts from the file must start from that copy:
#   - `>>` appends, `dd conv=notrunc` in-place edits, `truncate -s`, a
#     `touch -d` (an open with O_CREAT of an existing name, then futimens)
#     and chmod of files whose home moved keep their content (they opened
#     on the new, empty home: 13 of 20 files read only the appended line,
#     a zero-filled truncate, an empty touched file; outside tester
#     s38-t1-sticky-*.sh);
#   - after the repair every file reads the same, and is on exactly one
#     shard, also after a remount;
#   - logs held open, appended and fsync'd while repairs run and another
#     descriptor follows them: no line lost (the repair moved a log home
#     under its open writer, whose later writes went to a file no name
#     reached), each on one shard once closed.
. "$(dirname "$0")/lib.sh"

N=20

# on_shards NAME: how many of the shards hold NAME.
on_shards() {
	local n=0 s
	for s in a b c; do
		[ -e "$T/$s/$1" ] && n=$((n + 1))
	done
	echo "$n"
}

# check MNT WHEN: every file reads as the model says.
check() {
	local m=$1 when=$2 i got bad=0
	for ((i = 0; i < 5 * N; i++)); do
		got=$(od -An -c "$m/f$i" 2>&1 | tr -s ' \n' ' ') || got="<unreadable>"
		if [ "$got" != "${want[$i]}" ]; then
			log "$when: f$i reads '$got', want '${want[$i]}'"
			bad=$((bad + 1))
		fi
	done
	[ "$bad" -eq 0 ] || fail "$when: $bad of $((5 * N)) files lost content"
}

# od_of FORMAT ARG...: od's view of what printf prints (the model's
# spelling: trailing newlines kept)
od_of() {
	# shellcheck disable=SC2059
	printf "$@" | od -An -c | tr -s ' \n' ' '
}

# edit MNT: the changes that start from each file, and the model
edit() {
	local m=$1 i
	for ((i = 0; i < N; i++)); do
		echo "new-$i" >>"$m/f$i" || fail "append to f$i failed"
		want[i]=$(od_of 'old-%d\nnew-%d\n' "$i" "$i")
	done
	for ((i = N; i < 2 * N; i++)); do
		printf 'XY' | dd of="$m/f$i" bs=1 seek=1 conv=notrunc status=none ||
			fail "dd into f$i failed"
		want[i]=$(od_of 'oXY-%d\n' "$i")
	done
	for ((i = 2 * N; i < 3 * N; i++)); do
		truncate -s 5 "$m/f$i" || fail "truncate of f$i failed"
		want[i]=$(od_of 'old-%.1s' "$i")
	done
	for ((i = 3 * N; i < 4 * N; i++)); do
		touch -m -d 2001-01-01 "$m/f$i" || fail "touch of f$i failed"
		[ "$(stat -c %Y "$m/f$i")" = "$(date -d 2001-01-01 +%s)" ] ||
			fail "touch -d of f$i did not set its mtime"
	done
	for ((i = 4 * N; i < 5 * N; i++)); do
		chmod 600 "$m/f$i" || fail "chmod of f$i failed"
	done
}

# write MNT: every file written anew, and the model
write() {
	local m=$1 i
	for ((i = 0; i < 5 * N; i++)); do
		printf 'old-%d\n' "$i" >"$m/f$i" || fail "write of f$i failed"
		want[i]=$(od_of 'old-%d\n' "$i")
	done
}

# settle MNT: the repair moves every edited key home; then each file is on
# one shard
settle() {
	local m=$1 i n
	repair_settled "$m" 30
	for ((i = 0; i < 5 * N; i++)); do
		n=$(on_shards "f$i")
		[ "$n" -eq 1 ] || fail "f$i is on $n shards"
	done
}

log "--- add of a third shard at run time"
new_config "$T/g.conf" m
cfg_mux m sticky-by-key "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
cfg_file c "$T/c"
mount_smux "$T/g.conf" "$T/m"
write "$T/m"
echo "add c" >"$T/m/.smux/ctl" || fail "add c refused"
edit "$T/m"
check "$T/m" "after the edits"
settle "$T/m"
check "$T/m" "after the repair"
unmount_smux "$T/m"
sed -i 's/^backends = a b$/backends = a b c/' "$T/g.conf"
grep -q '^backends = a b c$' "$T/g.conf" || fail "g.conf: backends not changed"
mount_smux "$T/g.conf" "$T/m"
check "$T/m" "after a remount"
unmount_smux "$T/m"

log "--- a remount with a longer backends list"
rm -rf "$T/a" "$T/b" "$T/c" "$T/state/g"
mkdir -p "$T/a" "$T/b" "$T/c"
sed -i 's/^backends = a b c$/backends = a b/' "$T/g.conf"
mount_smux "$T/g.conf" "$T/m"
write "$T/m"
unmount_smux "$T/m"
for ((i = 0; i < 5 * N; i++)); do
	[ -e "$T/a/f$i" ] || [ -e "$T/b/f$i" ] || fail "f$i is on neither a nor b"
done
sed -i 's/^backends = a b$/backends = a b c/' "$T/g.conf"
mount_smux "$T/g.conf" "$T/m"
check "$T/m" "after the remount with c"
edit "$T/m"
check "$T/m" "after the edits"
settle "$T/m"
check "$T/m" "after the repair"
unmount_smux "$T/m"
mount_smux "$T/g.conf" "$T/m"
check "$T/m" "after a remount"

# logs kept open across repairs: 12 logs written before the growth (most
# live off their new home now), each appended and fsync'd 30 times
# through one descriptor while another follows it (tail -f) and repairs
# run; nothing moves under the open writer, every line is read, and once
# closed each log goes home whole
log "--- logs held open after the growth"
for ((i = 0; i < 12; i++)); do printf 'start %d\n' "$i" >"$T/m/log$i"; done
unmount_smux "$T/m"
sed -i 's/^backends = a b c$/backends = a b c d/' "$T/g.conf"
cfg_file d "$T/d"
mount_smux "$T/g.conf" "$T/m"
timeout 120 python3 - "$T/m" <<'PY' || fail "the logs held open lost lines"
import os, sys
m = sys.argv[1]
ws = [os.open("%s/log%d" % (m, i), os.O_WRONLY | os.O_APPEND) for i in range(12)]
rs = [open("%s/log%d" % (m, i), "rb") for i in range(12)]
seen = [r.read() for r in rs]
for n in range(30):
    for i, w in enumerate(ws):
        os.write(w, b"line %d %d\n" % (i, n))
        os.fsync(w)
    if n % 5 == 4:
        with open(m + "/.smux/ctl", "w") as c:
            c.write("repair\n")
    for i, r in enumerate(rs):
        seen[i] += r.read()
for i in range(12):
    want = b"start %d\n" % i + b"".join(b"line %d %d\n" % (i, n)
                                       for n in range(30))
    if seen[i] != want:
        sys.exit("log%d followed: %r" % (i, seen[i][-60:]))
for w in ws:
    os.close(w)
PY
repair_settled "$T/m" 30
for ((i = 0; i < 12; i++)); do
	[ "$(wc -l <"$T/m/log$i")" -eq 31 ] || fail "log$i has $(wc -l <"$T/m/log$i") lines, want 31"
	n=0
	for s in a b c d; do [ -e "$T/$s/log$i" ] && n=$((n + 1)); done
	[ "$n" -eq 1 ] || fail "log$i is on $n shards"
done
unmount_smux "$T/m"
log "ok: $((5 * N)) files edited after the shard list grew, each read back whole; 12 logs held open"

