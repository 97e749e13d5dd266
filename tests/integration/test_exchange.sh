#!/usr/bin/env bash
# test_exchange.sh SETUP - renameat2(RENAME_EXCHANGE) through a mount of
# SETUP: "file" (one file backend), "mirror" (two file backends),
# "failover" (two file backends) or "memory" (an object store):
#   - a file and a directory swap names, through the mount and on every
#     replica, each keeping its inode there (one renameat2 per replica);
#     two files swap; a directory's tree moves with it;
#   - what is open follows its content to the other name: an appender
#     inside the directory, an appender of the file, a reader, and an
#     open directory handle (it lists the directory it opened);
#   - a missing name is ENOENT, EXCHANGE with NOREPLACE is EINVAL;
#   - mirror: with a replica drained it is EINVAL (no exchange in one
#     call on every replica) and nothing moved; after undrain it works;
#   - memory: EINVAL (no atomic exchange), nothing moved.
. "$(dirname "$0")/lib.sh"

SETUP=${1:?usage: test_exchange.sh file|mirror|failover|memory}
M=$T/mnt
CONF=$T/xchg.conf

tree_config "$SETUP" "$CONF"
mount_smux "$CONF" "$M"

# xchg A B [FLAGS]: renameat2(A, B, FLAGS, default RENAME_EXCHANGE);
# prints the error's name and fails when it fails
xchg() {
	python3 - "$1" "$2" "${3:-2}" <<'EOF'
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, os.fsencode(sys.argv[1]), -100,
                  os.fsencode(sys.argv[2]), int(sys.argv[3])):
    print(errno.errorcode[ctypes.get_errno()])
    sys.exit(1)
EOF
}
expect() { [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"; }

printf 'A\n' >"$M/a"
mkdir -p "$M/d/sub"
printf 'X\n' >"$M/d/x"
printf 'Y\n' >"$M/d/sub/y"
printf 'F\n' >"$M/f"

if [ "$SETUP" = memory ]; then
	log "--- memory: no exchange, nothing moved"
	expect "exchange on memory" "$(xchg "$M/a" "$M/d" || true)" EINVAL
	expect "a after a refused exchange" "$(cat "$M/a")" A
	expect "d/x after a refused exchange" "$(cat "$M/d/x")" X
	unmount_smux "$M"
	exit 0
fi

log "--- a file and a directory swap, each keeping its inode"
declare -A ino_a ino_d
for r in $REPLICAS; do
	ino_a[$r]=$(stat -c %i "$r/a")
	ino_d[$r]=$(stat -c %i "$r/d")
done
# open across the exchange: an appender in the directory and of the
# file, a reader of the file, a handle of the directory
exec 3>>"$M/d/x" 4>>"$M/a" 5<"$M/a"
python3 - "$M" <<'EOF' >"$T/dirfd.out" &
import ctypes, os, sys, time
m = sys.argv[1]
fd = os.open(m + "/d", os.O_RDONLY | os.O_DIRECTORY)
open(m + "/dirfd.ready", "w").close()
end = time.monotonic() + 30  # bounded: never keeps the mount busy
while os.path.exists(m + "/dirfd.ready") and time.monotonic() < end:
    time.sleep(0.05)
print(" ".join(sorted(os.listdir(fd))))
EOF
dpid=$!
for _ in $(seq 100); do [ -e "$M/dirfd.ready" ] && break; sleep 0.05; done
[ -e "$M/dirfd.ready" ] || fail "the directory handle was not opened"
rc=0
xchg "$M/a" "$M/d" || rc=$?
rm "$M/dirfd.ready"
wait "$dpid" || rc=1
printf 'X2\n' >&3
printf 'A2\n' >&4
reader=$(cat <&5)
exec 3>&- 4>&- 5<&-
[ "$rc" -eq 0 ] || fail "exchange of a file and a directory failed"
expect "the open directory handle lists" "$(cat "$T/dirfd.out")" "sub x"
[ -d "$M/a" ] && [ -f "$M/d" ] || fail "a is not a directory or d not a file"
expect "a/sub/y" "$(cat "$M/a/sub/y")" Y
# the reader reads the file it opened, appended to meanwhile
expect "the reader reads on" "$reader" "$(printf 'A\nA2')"
expect "a/x after its appender" "$(cat "$M/a/x")" "$(printf 'X\nX2')"
expect "d after its appender" "$(cat "$M/d")" "$(printf 'A\nA2')"
for r in $REPLICAS; do
	expect "$r/a's inode" "$(stat -c %i "$r/a")" "${ino_d[$r]}"
	expect "$r/d's inode" "$(stat -c %i "$r/d")" "${ino_a[$r]}"
	expect "$r/a/x" "$(cat "$r/a/x")" "$(printf 'X\nX2')"
	expect "$r/d" "$(cat "$r/d")" "$(printf 'A\nA2')"
done

log "--- two files swap"
xchg "$M/d" "$M/f" || fail "exchange of two files failed"
expect "f" "$(cat "$M/f")" "$(printf 'A\nA2')"
expect "d" "$(cat "$M/d")" F
for r in $REPLICAS; do
	expect "$r/f" "$(cat "$r/f")" "$(printf 'A\nA2')"
	expect "$r/d" "$(cat "$r/d")" F
done

log "--- errors"
expect "exchange with a missing name" "$(xchg "$M/d" "$M/nope" || true)" \
	ENOENT
expect "EXCHANGE|NOREPLACE" "$(xchg "$M/d" "$M/f" 3 || true)" EINVAL
expect "d after the refusals" "$(cat "$M/d")" F

if [ "$SETUP" = mirror ]; then
	log "--- mirror: a replica drained, no exchange, nothing moved"
	echo "drain b1" >"$M/.smux/ctl" || fail "drain b1 failed"
	expect "exchange with b1 drained" "$(xchg "$M/d" "$M/f" || true)" \
		EINVAL
	expect "d with b1 drained" "$(cat "$M/d")" F
	echo "undrain b1" >"$M/.smux/ctl" || fail "undrain b1 failed"
	for _ in $(seq 100); do
		[ "$(stats "$M" .pendingHints)" = 0 ] && break
		sleep 0.1
	done
	expect "pending hints 10 s after undrain" \
		"$(stats "$M" .pendingHints)" 0
	xchg "$M/d" "$M/f" || fail "exchange after undrain failed"
	for r in $REPLICAS; do
		expect "$r/d after undrain" "$(cat "$r/d")" "$(printf 'A\nA2')"
		expect "$r/f after undrain" "$(cat "$r/f")" F
	done
fi

unmount_smux "$M"
# what the replicas hold is the same, file by file
if [ "$SETUP" = mirror ]; then
	diff -r "$T/b0" "$T/b1" || fail "the replicas differ"
fi
log "ok"
