#!/usr/bin/env bash
# test_chmod_open.sh - a chmod of a file open for writing on a mirror and
# a failover mount of two file backends stands after the writer's close,
# as on ext4 (found by an outside tester, s44-t1): made behind the mount
# (in both backend directories, as another program on the storage would)
# while `python` held the file open for appending, it went back to 0644
# at the close on every replica - the commit gave each replica the mode
# the file had at the open. And one made through the mount stands too.
. "$(dirname "$0")/lib.sh"

cat >"$T/t.py" <<'PY'
import os, sys, time
m, name, how = sys.argv[1], sys.argv[2], sys.argv[3]
dirs = sys.argv[4:]
with open(m + "/" + name, "w") as f:
    f.write("0\n")
os.chmod(m + "/" + name, 0o644)
time.sleep(1.2)  # past attr_timeout
fd = os.open(m + "/" + name, os.O_WRONLY | os.O_APPEND)
os.write(fd, b"1\n")
for d in (dirs if how == "behind" else [m]):
    if os.path.exists(d + "/" + name):  # failover: the first member's
        os.chmod(d + "/" + name, 0o600)
os.write(fd, b"2\n")
os.close(fd)
time.sleep(1.2)
print(oct(os.stat(m + "/" + name).st_mode & 0o777))
PY
for mode in mirror failover; do
	new_config "$T/$mode.conf" m
	cfg_mux m "$mode" "a b"
	cfg_file a "$T/$mode-a"
	cfg_file b "$T/$mode-b"
	M=$T/mnt-$mode
	mount_smux "$T/$mode.conf" "$M"
	# (failover writes the first member only)
	for how in behind through; do
		f=f-$how
		got=$(timeout 30 python3 "$T/t.py" "$M" "$f" "$how" "$T/$mode-a" "$T/$mode-b") ||
			fail "$mode $how: the program failed"
		[ "$got" = 0o600 ] || fail "$mode: chmod 600 $how the mount while open, after the close: $got"
		[ "$(stat -c %a "$T/$mode-a/$f")" = 600 ] ||
			fail "$mode $how: $f on a: $(stat -c %a "$T/$mode-a/$f")"
		[ "$(cat "$M/$f" | tr '\n' ' ')" = "0 1 2 " ] || fail "$mode $how: $f holds $(cat "$M/$f")"
	done
	log "$mode: a chmod of an open file stands after its close"
	unmount_smux "$M"
done
