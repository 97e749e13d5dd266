#!/usr/bin/env bash
# test_fallocate.sh KIND - fallocate(2) through the mount (issue 8: "behave
# like a local filesystem"), with util-linux's fallocate and python3's
# os.posix_fallocate, over a file backend (file), a mirror of two (mirror),
# a failover of two (failover) and one s3 backend (s3, staged: no in-place
# writer).
#
# file, mirror, failover: every step runs on the mount and on a local
# reference file $T/ref (the same filesystem kind as the backends):
#   - fallocate -l 64M: the size, and each backing file has the blocks;
#   - fallocate -n (keep size) past the end: the size stays, blocks grow;
#   - 8 MiB of data, fallocate -p (punch): zeros, and `du` of each backing
#     file shrinks;
#   - fallocate -z inside the file, and past its end (extends);
#   - fallocate -d (dig holes): the zeros written become holes;
#   - a mode no writer takes (-c, collapse range): "Operation not
#     supported", nothing changed;
#   - os.posix_fallocate of a new file: its size and blocks;
#   then cmp and stat -c %s of the mount's file and of every replica's
#   backing file against the reference (failover: the standby holds no
#   copy), and again through a fresh mount; a read-only mount refuses
#   fallocate (EROFS) and changes nothing.
# s3: fallocate -l 5M of a new file, then cmp with zeros through a fresh
#   mount; a punched and a zeroed range of a written file, and a kept-size
#   allocation, the same way; os.posix_fallocate; collapse range refused
#   (FUSE passes only keep size, punch and zero range to the daemon).
. "$(dirname "$0")/lib.sh"

KIND=${1:?usage: test_fallocate.sh file|mirror|failover|s3}
M=$T/mnt
A=$T/a
B=$T/b
CONF=$T/falloc.conf
MIB=$((1 << 20))

command -v fallocate >/dev/null || fail "no fallocate (util-linux)"

case $KIND in
file)
	new_config "$CONF" root
	cfg_file root "$A"
	replicas=("$A")
	;;
mirror | failover)
	new_config "$CONF" root
	cfg_mux root "$KIND" "a b"
	cfg_file a "$A"
	cfg_file b "$B"
	replicas=("$A")
	# a failover standby gets what the primary took only on a hint
	[ "$KIND" = mirror ] && replicas+=("$B")
	;;
s3) net_config s3 "$CONF" ;;
*) fail "unknown kind $KIND" ;;
esac
mount_smux "$CONF" "$M"

# expect WHAT GOT WANT
expect() { [ "$2" = "$3" ] || fail "$KIND: $1: got '$2', want '$3'"; }
# blocks FILE: allocated KiB
kib() { du -k "$1" | cut -f1; }
# both ARGS...: fallocate ARGS on the mount's file and on the reference
both() {
	fallocate "$@" "$M/f" || fail "$KIND: fallocate $* on the mount"
	fallocate "$@" "$T/ref" || fail "fallocate $* on the reference"
}
# same WHAT: the mount's file and every replica's equal the reference
same() {
	local r want
	want=$(stat -c %s "$T/ref")
	expect "$1: size through the mount" "$(stat -c %s "$M/f")" "$want"
	cmp "$M/f" "$T/ref" || fail "$KIND: $1: content through the mount"
	for r in "${replicas[@]}"; do
		expect "$1: size of $r/f" "$(stat -c %s "$r/f")" "$want"
		cmp "$r/f" "$T/ref" || fail "$KIND: $1: content of $r/f"
	done
}
# posix_fallocate FILE OFF LEN: python3's os.posix_fallocate on FILE
posix_falloc() {
	python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.posix_fallocate(fd, int(sys.argv[2]), int(sys.argv[3]))
os.close(fd)' "$@" || fail "$KIND: os.posix_fallocate $*"
}

if [ "$KIND" = s3 ]; then
	log "s3: fallocate -l 5M of a new file, zeros after a fresh mount"
	fallocate -l 5M "$M/g" || fail "s3: fallocate -l 5M"
	expect "size of g" "$(stat -c %s "$M/g")" $((5 * MIB))
	head -c $((1 << 20)) /dev/urandom >"$T/ref"
	cp "$T/ref" "$M/f"
	both -p -o 4096 -l 8192
	both -z -o 100000 -l 5000
	both -n -o $MIB -l $MIB
	both -z -o $((MIB - 10)) -l 20 # extends by 10 bytes
	posix_falloc "$M/p" 0 3000
	out=$(fallocate -c -o 0 -l 4096 "$M/f" 2>&1) && fail "s3: fallocate -c succeeded"
	case $out in *"not supported"*) ;; *) fail "s3: fallocate -c: $out" ;; esac
	unmount_smux "$M"
	mount_smux "$CONF" "$M"
	head -c $((5 * MIB)) /dev/zero >"$T/zeros"
	cmp "$M/g" "$T/zeros" || fail "s3: g is not 5 MiB of zeros"
	expect "size of f" "$(stat -c %s "$M/f")" $((MIB + 10))
	cmp "$M/f" "$T/ref" || fail "s3: f after punch and zero ranges"
	expect "size of p" "$(stat -c %s "$M/p")" 3000
	cmp "$M/p" <(head -c 3000 /dev/zero) || fail "s3: p is not zeros"
	unmount_smux "$M"
	stop_net_servers
	log "s3: ok"
	exit 0
fi

log "$KIND: fallocate -l 64M: size and blocks on every replica"
: >"$T/ref"
both -l 64M
same "fallocate -l 64M"
for r in "${replicas[@]}"; do
	[ "$(kib "$r/f")" -ge 65536 ] ||
		fail "$KIND: $r/f has $(kib "$r/f") KiB allocated, want 64 MiB"
done
if [ "$KIND" = failover ]; then
	[ ! -e "$B/f" ] || fail "failover: the standby got a copy"
fi

log "$KIND: fallocate -n (keep size) past the end"
declare -A before
for r in "${replicas[@]}"; do before[$r]=$(kib "$r/f"); done
both -n -o 64M -l 16M
same "fallocate -n"
for r in "${replicas[@]}"; do
	[ $(($(kib "$r/f") - before[$r])) -ge 16384 ] ||
		fail "$KIND: $r/f: blocks did not grow by 16 MiB ($(kib "$r/f") KiB)"
done

log "$KIND: data, then fallocate -p: zeros, du shrinks"
head -c $((8 * MIB)) /dev/urandom >"$T/data"
dd if="$T/data" of="$M/f" bs=1M conv=notrunc status=none
dd if="$T/data" of="$T/ref" bs=1M conv=notrunc status=none
for r in "${replicas[@]}"; do before[$r]=$(kib "$r/f"); done
both -p -o 1M -l 2M
same "fallocate -p"
for r in "${replicas[@]}"; do
	[ $((before[$r] - $(kib "$r/f"))) -ge 2048 ] ||
		fail "$KIND: $r/f: punch freed $((before[$r] - $(kib "$r/f"))) KiB, want 2 MiB"
done
cmp -n $((2 * MIB)) -i $MIB "$M/f" /dev/zero || fail "$KIND: punched range is not zeros"

log "$KIND: fallocate -z inside and past the end"
both -z -o 5M -l 1M
both -z -o 80M -l 4M
same "fallocate -z"
expect "size after -z past the end" "$(stat -c %s "$M/f")" $((84 * MIB))

log "$KIND: fallocate -d digs holes where the zeros are"
for r in "${replicas[@]}"; do before[$r]=$(kib "$r/f"); done
fallocate -d "$M/f" || fail "$KIND: fallocate -d"
same "fallocate -d"
for r in "${replicas[@]}"; do
	[ "$(kib "$r/f")" -lt "${before[$r]}" ] ||
		fail "$KIND: $r/f: dig-holes freed nothing ($(kib "$r/f") KiB)"
done

log "$KIND: collapse range: Operation not supported, nothing changed"
out=$(fallocate -c -o 0 -l 1M "$M/f" 2>&1) && fail "$KIND: fallocate -c succeeded"
case $out in *"not supported"*) ;; *) fail "$KIND: fallocate -c: $out" ;; esac
same "after fallocate -c"

log "$KIND: os.posix_fallocate"
posix_falloc "$M/p" 0 $((3 * MIB))
expect "size of p" "$(stat -c %s "$M/p")" $((3 * MIB))
for r in "${replicas[@]}"; do
	expect "size of $r/p" "$(stat -c %s "$r/p")" $((3 * MIB))
	[ "$(kib "$r/p")" -ge 3072 ] || fail "$KIND: $r/p is not allocated"
done

log "$KIND: the same through a fresh mount"
unmount_smux "$M"
mount_smux "$CONF" "$M"
same "fresh mount"

log "$KIND: a read-only mount refuses it (Read-only file system)"
unmount_smux "$M"
mount_smux "$CONF" "$M" ro
out=$(fallocate -l 100M "$M/f" 2>&1) && fail "$KIND: fallocate on a read-only mount"
case $out in *"Read-only"*) ;; *) fail "$KIND: read-only: $out" ;; esac
same "read-only mount"
log "$KIND: ok"
