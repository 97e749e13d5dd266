#!/usr/bin/env bash
# test_ino_drain.sh - a mirror of two file backends [a, b]: a file keeps
# its st_ino when the replica that answers for it changes (a drain; an
# outage does the same), under every name (hard links) and whatever made
# the number first (a stat, the create's fstat, a listing), and the
# programs that compare numbers work under a rolling drain (inomap.c).
# Before, the number was the answering replica's identity: git's local
# clone died "hardlink different from source" (its lstat of an object
# and the one of the new link were answered by two replicas), and tar -x
# left symlinks as the empty files it makes first (it swaps a
# placeholder for its link only while the placeholder's number holds).
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" m attr_timeout=0 entry_timeout=0
cfg_mux m mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
M=$T/mnt
CTL=$M/.smux/ctl
mount_smux "$T/c.conf" "$M"

# one file of three names, each made and first seen its own way
mkdir "$M/d" "$M/e"
echo one >"$M/d/f"
ln "$M/d/f" "$M/d/g"
ln "$M/d/f" "$M/e/h"
python3 - "$M" <<'EOF' || fail "numbers moved with the answering replica"
import os, sys
m = sys.argv[1]
def ctl(s):
    with open(m + "/.smux/ctl", "w") as f:
        f.write(s + "\n")
names = ["d/f", "d/g", "e/h"]
want = os.lstat(m + "/d/f").st_ino
# a new file's number comes from its create (fstat of the descriptor);
# another's from a listing (ls -l: readdirplus)
fd = os.open(m + "/d/new", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
new = os.fstat(fd).st_ino
os.close(fd)
listed = {e.name: e.inode() for e in os.scandir(m + "/e")}
bad = 0
for i, r in enumerate(["a", "b", "a"]):
    ctl("drain " + r)
    for n in names:
        got = os.lstat(m + "/" + n).st_ino
        if got != want:
            print(f"{r} drained: {n} shows {got}, not {want}"); bad += 1
    if os.lstat(m + "/d/new").st_ino != new:
        print(f"{r} drained: d/new's number moved"); bad += 1
    if os.lstat(m + "/e/h").st_ino != listed["h"]:
        print(f"{r} drained: e/h is not what the listing said"); bad += 1
    # a link made now shows the file's number too
    k = f"e/k{i}"
    os.link(m + "/d/f", m + "/" + k)
    names.append(k)
    if os.lstat(m + "/" + k).st_ino != want:
        print(f"{r} drained: the new link {k} has another number"); bad += 1
    ctl("undrain " + r)
sys.exit(1 if bad else 0)
EOF
log "three names, a new file and a listed one keep their numbers"

# a rename keeps the number; a file made at a deleted name, or under a
# renamed directory's old name, while a is drained has its own number,
# never another file's (review of 4bcd1d2: a new symlink q/x showed the
# number of the file moved to q2/x)
python3 - "$M" <<'EOF' || fail "rename, delete or directory rename"
import os, sys
m = sys.argv[1]
def ctl(s):
    with open(m + "/.smux/ctl", "w") as f:
        f.write(s + "\n")
with open(m + "/d/r", "w") as f:
    f.write("r\n")
n = os.lstat(m + "/d/r").st_ino
os.rename(m + "/d/r", m + "/e/r2")
ctl("drain a")
ok = os.lstat(m + "/e/r2").st_ino == n
ctl("undrain a")
# a backend may give the new file the freed inode's number, as a local
# file system may: only another live file's is wrong
os.unlink(m + "/e/r2")
ctl("drain a")
with open(m + "/e/r2", "w") as f:
    f.write("other\n")
other = os.lstat(m + "/e/r2").st_ino
ctl("undrain a")
if not ok or other == os.lstat(m + "/d/f").st_ino:
    print("rename kept:", ok, "new file's number", other, "old", n)
    sys.exit(1)
os.mkdir(m + "/q")
with open(m + "/q/x", "w") as f:
    f.write("x\n")
n0 = os.lstat(m + "/q/x").st_ino
ctl("drain a")
os.rename(m + "/q", m + "/q2")
os.mkdir(m + "/q")
os.symlink("zz", m + "/q/x")
new = os.lstat(m + "/q/x").st_ino
ctl("undrain a")
# the moved file shows n0 again once a answers
if new in (n0, os.lstat(m + "/q2/x").st_ino):
    print("q/x (a new symlink) shows", new, "the moved file's", n0)
    sys.exit(1)
EOF
log "a renamed file keeps its number; new files have their own"

# tar -x of symlinks whose targets climb (../t/fN): tar makes an empty
# placeholder file for each, notes its number (fstat), and at the end
# swaps each placeholder whose number still holds for its link; here a
# drain of a falls between the two (the archive comes through a pipe)
mkdir "$T/src"
for i in $(seq 100); do
	echo "$i" >"$T/src/f$i"
	ln -s "../t/f$i" "$T/src/l$i"
done
tar -C "$T" -cf "$T/t.tar" src
size=$(stat -c %s "$T/t.tar")
for r in a b; do
	mkdir "$M/x$r"
	{
		head -c $((size / 2)) "$T/t.tar"
		sleep 0.5
		echo "drain $r" >"$CTL"
		sleep 0.5
		tail -c +$((size / 2 + 1)) "$T/t.tar"
	} | timeout 60 tar -C "$M/x$r" -xf - || fail "tar -x with $r drained"
	echo "undrain $r" >"$CTL"
	n=$(find "$M/x$r" -type l | wc -l)
	[ "$n" = 100 ] || fail "tar -x, $r drained midway: $n symlinks of 100"
done
log "tar -x of 100 climbing symlinks, a replica drained midway"

# git's local clone hard-links the objects and compares each link's
# number with its object's, under a rolling drain
(cd "$M" && git init -q g && cd g && cp "$T"/src/f* . && git add -A &&
	git -c user.name=t -c user.email=t@t commit -qm one) ||
	fail "git setup"
touch "$T/rolling"
(
	while [ -e "$T/rolling" ]; do
		for r in a b; do
			echo "drain $r" >"$CTL"
			sleep 0.2
			echo "undrain $r" >"$CTL"
			sleep 0.2
		done
	done
) &
ROLL=$!
bad=
for k in 1 2 3; do
	out=$(timeout 60 git clone -q "$M/g" "$M/c$k" 2>&1) ||
		bad="$bad; clone $k: $out"
done
rm -f "$T/rolling"
wait "$ROLL"
echo "undrain a" >"$CTL"
echo "undrain b" >"$CTL"
[ -z "$bad" ] || fail "git clone under a rolling drain${bad}"
log "git clone (local) under a rolling drain"
unmount_smux "$M"
