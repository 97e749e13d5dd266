#!/usr/bin/env bash
# test_reader_keeps_file.sh - a descriptor open for reading through a
# mount of one file backend keeps reading the file it opened, as on ext4
# (found by an outside tester, s44-t1): f open for reading and for
# appending, another program renames g over f in the backend directory,
# the writer appends and closes: the reader read the new f (g's bytes),
# where ext4's reader reads the old file with the append. And the other
# way round, a file written anew through the mount (echo > f), which
# ext4's reader sees too. Each case is run on a plain directory first
# and must give the same bytes through the mount.
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" a
cfg_raw "[backend a]
type = file
path = $T/a
"
mkdir -p "$T/a" "$T/ext"
M=$T/mnt
mount_smux "$T/c.conf" "$M"

cat >"$T/behind.py" <<'PY'
import os, sys, time
m, d = sys.argv[1], sys.argv[2]
open(d + "/f", "w").write("old\n")
open(d + "/g", "w").write("new\n")
time.sleep(1.2)  # past attr_timeout: the mount asks again
r = os.open(m + "/f", os.O_RDONLY)
w = os.open(m + "/f", os.O_WRONLY | os.O_APPEND)
os.rename(d + "/g", d + "/f")
time.sleep(1.2)
os.write(w, b"appended\n")
os.close(w)
print(repr(os.pread(r, 100, 0)))
PY
cat >"$T/anew.py" <<'PY'
import os, sys
m = sys.argv[1]
with open(m + "/h", "w") as f:
    f.write("first version\n")
r = os.open(m + "/h", os.O_RDONLY)
os.pread(r, 100, 0)
with open(m + "/h", "w") as f:
    f.write("second\n")
print(repr(os.pread(r, 100, 0)))
PY
for t in behind anew; do
	want=$(timeout 20 python3 "$T/$t.py" "$T/ext" "$T/ext")
	got=$(timeout 20 python3 "$T/$t.py" "$M" "$T/a")
	log "$t: ext4 $want, smuxfs $got"
	[ "$got" = "$want" ] || fail "$t: the reader read $got, on ext4 $want"
done
unmount_smux "$M"
