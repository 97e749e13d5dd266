#!/usr/bin/env bash
# test_replay_symlink_way.sh - a mirror of two file backends [a, b]: the
# delete b missed of a name whose directory became a symlink meanwhile
# (rm -r d; ln -s elsewhere d while b was drained; also with d made
# after the drain, so that b never had it) ends once replayed,
# whichever of the two replays first. Before: when the symlink's replay
# ran first, the delete of d/f failed at every try ("a symlink is in the
# way": a file backend never follows one), and the hint stayed pending
# for good (s49-t2's exerciser, seed 102).
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" m
cfg_mux m mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
M=$T/mnt
CTL=$M/.smux/ctl
mount_smux "$T/c.conf" "$M"

n=${SMUX_WAY_DIRS:-8}
for i in $(seq 1 "$n"); do
	mkdir -p "$M/d$i/sub"
	echo f >"$M/d$i/f"
done
echo "drain b" >"$CTL"
for i in $(seq 1 "$n"); do
	# d$i: there on b; e$i: made and gone while b was out
	mkdir -p "$M/e$i/sub"
	echo g >"$M/e$i/sub/g"
	echo f >"$M/e$i/f"
	rm -r "$M/d$i" "$M/e$i"
	ln -s "elsewhere$i" "$M/d$i"
	ln -s "elsewhere$i" "$M/e$i"
done
echo "undrain b" >"$CTL"
repair_settled "$M" 30
for i in $(seq 1 "$n"); do
	for r in a b; do
		for k in d e; do
			[ "$(readlink "$T/$r/$k$i")" = "elsewhere$i" ] ||
				fail "$r: $k$i is not the symlink"
		done
	done
done
log "$n deletes under names that became symlinks: replayed and ended"
unmount_smux "$M"
