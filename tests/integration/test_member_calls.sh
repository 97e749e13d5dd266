#!/usr/bin/env bash
# test_member_calls.sh - what a created file costs in member calls on a
# mount over one file backend (issue 8's untar row; every member call is
# a hand-off to a bulkhead worker and back):
#
#   - 20 files made with open(O_CREAT|O_EXCL), fstat, write, close cost at
#     most 4 member calls each (the name's lookup, the writer's open, the
#     write, the commit at close; the writer's close at release is not
#     waited for). The getattr the kernel sends after the create is
#     answered from what the writer opened (smux_writer.info), not by a
#     HEAD: on main it cost 5 each (100 for the 20).
#   - the files read back whole, with the mode asked for;
#   - an unlink while another file is open is its lookup and the delete
#     (no head of the name first: 3 calls each on main).
#
# Counts the backends' hits + misses of .smux/stats around the creates.
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || fail "python3 is missing (scripts/install-deps.sh)"

M=$T/mnt
new_config "$T/calls.conf" a
cfg_file a "$T/a"
mount_smux "$T/calls.conf" "$M"

calls() { stats "$M" '[.backends[] | .hits + .misses] | add'; }
# settled_calls: the count once nothing is in flight any more (the last
# writer's close at release is not waited for: under load it landed in
# the next measured window, a local CI's 21 calls for the 10 unlinks)
settled_calls() {
	local a b i
	b=$(calls)
	for ((i = 0; i < 50; i++)); do
		sleep 0.2
		a=$b
		b=$(calls)
		[ "$a" = "$b" ] && break
	done
	echo "$b"
}

before=$(settled_calls)
python3 - "$M" <<'PY' || fail "creating the files failed"
import os, sys
for i in range(20):
    fd = os.open(os.path.join(sys.argv[1], "f%d" % i),
                 os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640)
    os.fstat(fd)
    os.write(fd, b"file %d\n" % i)
    os.close(fd)
PY
after=$(calls)
n=$((after - before))
log "20 creates: $n member calls"
[ "$n" -le 80 ] || fail "20 creates cost $n member calls (at most 80 wanted: 4 each)"

for i in $(seq 0 19); do
	[ "$(cat "$M/f$i")" = "file $i" ] || fail "f$i reads back wrong"
	[ "$(stat -c %a "$M/f$i")" = 640 ] || fail "f$i has mode $(stat -c %a "$M/f$i"), not 640"
	[ "$(cat "$T/a/f$i")" = "file $i" ] || fail "f$i is not whole on the backend"
done
log "the files are whole, mode 640"

# An unlink is two member calls (the kernel's lookup of the name, the
# delete) while another file is open
# (a database open while its journal is deleted, sqlite's every
# transaction): the name's file is asked first only when an open
# descriptor could need it (that name open, or a name of a file whose
# other names are counted).
exec 7<"$M/f0"
before=$(settled_calls)
for i in $(seq 1 10); do rm "$M/f$i"; done
after=$(calls)
n=$((after - before))
log "10 unlinks with another file open: $n member calls"
[ "$n" -le 20 ] || fail "10 unlinks with another file open cost $n member calls (at most 20 wanted)"
exec 7<&-

unmount_smux "$M"
