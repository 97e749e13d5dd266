#!/usr/bin/env bash
# test_posix_diff.sh KIND - the mount against the local disk it promises to
# behave like: posix_diff.c applies one seeded random sequence of system
# calls (open flags and modes, read/write, truncate, link, symlink, rename
# and renameat2, chmod/chown, utimensat, mkfifo, fallocate, readdir,
# descriptors whose names went away; then a phase as an unprivileged user)
# to a scratch directory on the filesystem the backing directories are on
# and to one on the mount, in lockstep, and compares every result (return
# value, errno, stat fields, which times moved, listings, bytes read).
#   KIND file      one file backend;
#   KIND mirror    a mirror of two: after the unmount both replicas hold
#                  what the scratch directory holds (types, modes, owners,
#                  link counts, sizes, link targets, contents);
#   KIND failover  a failover of two: the primary holds it.
# The mount has allow_other (so default_permissions), as test_perms.sh's,
# for the unprivileged phase.
#
# SMUX_IT_SEEDS (default 1, 2 on mirror: make check's time) and SMUX_IT_STEPS (default 2500) pick the
# runs; every seed runs even after one diverged, and each divergence is
# printed with the command that replays it (SMUX_DIFF_TRACE=1 adds the
# steps before it). SMUX_IT_POSIX_DIFF names a compiled posix_diff (run.sh
# compiles it once).
. "$(dirname "$0")/lib.sh"

KIND=${1:?usage: test_posix_diff.sh file|mirror|failover}
[ "$(id -u)" = 0 ] || fail "needs root (chown, a mount with allow_other)"
# make check runs one seed a kind, seeds 1 and 2 between them (both on
# every kind took 100 s of a lane; `make check-posix` runs 1-20)
case $KIND in mirror) SEEDS=${SMUX_IT_SEEDS:-2} ;; *) SEEDS=${SMUX_IT_SEEDS:-1} ;; esac
STEPS=${SMUX_IT_STEPS:-2500}
M=$T/mnt
P=$T/plain # the local disk, beside the backing directories

PD=${SMUX_IT_POSIX_DIFF:-}
if [ -z "$PD" ]; then
	PD=$T/posix_diff
	cc -std=c11 -O2 -Wall -Wextra -Werror -o "$PD" \
		"$SMUX_REPO/tests/integration/posix_diff.c"
fi

new_config "$T/pd.conf" root allow_other=true
case $KIND in
file)
	cfg_file root "$T/a"
	REPLICAS=("$T/a")
	;;
mirror | failover)
	cfg_mux root "$KIND" "a b" backend_timeout=10s
	cfg_file a "$T/a"
	cfg_file b "$T/b"
	REPLICAS=("$T/a")
	[ "$KIND" = mirror ] && REPLICAS+=("$T/b")
	;;
*) fail "unknown kind $KIND" ;;
esac
mkdir -p "$P"
chmod 755 "$P"
mount_smux "$T/pd.conf" "$M"

# listing DIR: every entry below DIR (type, mode, owner, link count, size
# but a directory's, link target) and every regular file's checksum
listing() {
	(
		cd "$1"
		find . -mindepth 1 -printf '%P|%y|%m|%U|%G|%n|%s|%l\n' |
			awk -F'|' -v OFS='|' '$2 == "d" { $7 = "-" } { print }' |
			sort
		find . -type f -print0 | sort -z | xargs -0 -r md5sum
	)
}

# Known divergences left out, compared again when these are set empty
# (each is still open; `make check` runs seed 1 or 2, `make check-posix`
# more):
# - link(2) of a FIFO (SMUX_DIFF_SKIP=fifolink): a FIFO of two names is
#   two pipes on the mount, one per name, where ext4 has one: each name
#   is its own kernel inode (libfuse's high-level API), and the kernel
#   keeps a pipe per inode; what is written through one name is not read
#   through the other (seed 3 with it in: a read gets 0 bytes where ext4
#   reads 5672). FIFOs themselves are in since session 26 (mkfifo was
#   left out before): with them seeds 1-40 (file) and 1-20 (mirror,
#   failover) agree, after four fixes they led to (posix_details
#   rename_same_file_unlink, special_unlinked_chown, chown_unchanged's
#   FIFO; test_perms' setgid and O_RDWR cases);
# - the times of a file open for writing are the daemon's clock while it
#   is open and the storage's once it is closed, so "did mtime/ctime move
#   in this step" differs right after a handle closes (SMUX_DIFF_TIMES=0).
# Not left out, and still found by some seeds of `make check-posix` (and
# of seeds 21-60, run by hand): the position after an O_APPEND write is
# the kernel's idea of the size, which can be stale after a truncation
# through another descriptor (the data lands at the real end; seed 8, and
# seed 5 on mirror);
# rename(2) between two names of one file (hard links) by a user who may
# not write the source's directory: ext4 answers 0 before any permission
# check (the same inode), the mount EACCES, as each name is its own
# kernel inode and default_permissions checks the directories first
# (seed 16, every kind, the unprivileged phase; the kernel's answer, no
# request reaches the daemon); for the same reason a descriptor whose
# name went may show attributes of up to one clock tick before a change
# through the file's other name (attributes valid for 0 s still serve
# within the tick they came; seed 41); on a mirror or failover, fchmod, fchown and
# futimens through a read-only descriptor whose name went stay with the
# descriptor (a reader holds one replica; test_posix_details leaves
# nameless_reader_chmod out there).
export SMUX_DIFF_SKIP=${SMUX_DIFF_SKIP-fifolink}
export SMUX_DIFF_TIMES=${SMUX_DIFF_TIMES-0}

bad=0
for seed in $SEEDS; do
	mkdir "$P/s$seed" "$M/s$seed"
	log "$KIND: seed $seed, $STEPS steps"
	rc=0
	timeout 240 "$PD" "$P/s$seed" "$M/s$seed" "$seed" "$STEPS" \
		2>"$T/pd.$seed.log" || rc=$?
	cat "$T/pd.$seed.log" >&2
	if [ "$rc" -ne 0 ]; then
		log "FAIL: $KIND: seed $seed diverged (exit $rc); replay: SMUX_IT_SEEDS=$seed SMUX_IT_STEPS=$STEPS $0 $KIND"
		bad=1
	fi
done

unmount_smux "$M"
# what each replica stores is what the local disk holds (a seed that
# diverged is left out: its trees differ already)
for seed in $SEEDS; do
	grep -q DIVERGENCE "$T/pd.$seed.log" && continue
	listing "$P/s$seed" >"$T/want.$seed"
	for r in "${REPLICAS[@]}"; do
		listing "$r/s$seed" >"$T/got.$seed"
		if ! diff -u "$T/want.$seed" "$T/got.$seed" >"$T/diff.$seed"; then
			head -n 40 "$T/diff.$seed" >&2
			log "FAIL: $KIND: seed $seed: $r differs from the local disk"
			bad=1
		fi
	done
done
[ "$bad" -eq 0 ] || fail "$KIND: divergences from the local disk (above)"
