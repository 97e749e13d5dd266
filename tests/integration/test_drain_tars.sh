#!/usr/bin/env bash
# test_drain_tars.sh - two `tar -x` of one archive into one directory of
# a mirror [a, b] while its members are drained and undrained in turn
# without a pause (drain a, undrain a, drain b, undrain b, four times):
# no tar error, and both replicas end as the tree (found by an outside
# tester, s44-t1). `drain b` took b out while a still missed what was
# written during its own drain: the opens of those files (the other
# tar's create of a name already there) failed with EIO. A drain now
# replays the pending hints of the members that stay first.
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" m
cfg_mux m mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
M=$T/mnt
CTL=$M/.smux/ctl
mount_smux "$T/c.conf" "$M"

S=$T/src
for d in 0 1 2 3 4 5 6 7; do
	mkdir -p "$S/t/d$d"
	for f in $(seq 1 120); do
		echo "file $d $f" >"$S/t/d$d/f$f"
	done
done
tar -C "$S" -cf "$T/t.tar" t

for run in 1; do
	rm -rf "$M/x"
	mkdir "$M/x"
	(timeout 120 tar -C "$M/x" -xf "$T/t.tar") 2>"$T/e1" &
	p1=$!
	(timeout 120 tar -C "$M/x" -xf "$T/t.tar") 2>"$T/e2" &
	p2=$!
	for k in 1 2 3 4; do
		for c in "drain a" "undrain a" "drain b" "undrain b"; do
			sleep 0.2
			echo "$c" >"$CTL" || fail "$c"
		done
	done
	wait "$p1" || true
	wait "$p2" || true
	errs=$(cat "$T/e1" "$T/e2")
	[ -z "$errs" ] || fail "run $run: tar errors: $(echo "$errs" | head -5)"
	diff -r "$S/t" "$M/x/t" >&2 || fail "run $run: the tree differs from the source"
	log "run $run: two tars through drains, no error"
done
repair_settled "$M" 30
diff -r -x .smuxfs-tmp "$T/a" "$T/b" >&2 || fail "a and b differ"
unmount_smux "$M"
