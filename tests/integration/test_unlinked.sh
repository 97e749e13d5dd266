#!/usr/bin/env bash
# test_unlinked.sh KIND - a file whose name is gone while it is open stays
# a file through its descriptors, as on a local filesystem (issue 8 item
# 11), on a mount of one file backend (file), a mirror of two (mirror), a
# failover of two (failover) and one file backend whose writers are
# spooled in cache_dir (staging: SMUXFS_FORCE_STAGING=1, as a tree that
# cannot write in place; the spool is the content):
#   - open, write, unlink: lseek SEEK_DATA/SEEK_HOLE (the mount's first),
#     fstat shows nlink 0 and the current size, write, read, fchmod and
#     futimens work through the descriptor, close works, and nothing of it
#     is left in any backend directory;
#   - fchown, fchmod, futimens of a nameless file through a writer and a
#     reader: fstat of both shows them (owner, mode, atime, mtime);
#   - a reader and an appender of one file, the name removed by another
#     process: fstat nlink 0 on both, and the reader reads what the
#     appender wrote since (descriptors of one file share its content);
#   - a reader open across a rename-replace (`mv new f`) keeps reading the
#     content it opened, fstat nlink 0, while the name shows the new file;
#   - a writer open across a rename-replace writes on into its own
#     (nameless) file and the new file under the name is untouched;
#   - `tail -f` keeps following a log that is removed while a writer
#     appends to it through its descriptor;
#   - hard links: `stat -c %i` of two names of one file is equal (nlink 2),
#     `find -samefile` finds both names, and `du` counts the file once;
#     two different files never share an inode number; an open file keeps
#     its number once its name is gone; fstat of a file whose name went
#     while open shows the names it has left (ln and rm of the others);
#   - a writer opened on a name whose file's nameless writer (ln, rm, mv
#     back) then writes reads, maps and keeps those bytes;
#   - rename(2) of a name over an open name of its file, then rm of the
#     target: fstat, mmap, fchmod through the first name's descriptors.
. "$(dirname "$0")/lib.sh"

KIND=${1:-file}
m=$T/mnt
A=$T/a
B=$T/b

new_config "$T/unl.conf" root
case $KIND in
file) cfg_file root "$A" ;;
staging)
	cfg_file root "$A"
	export SMUXFS_FORCE_STAGING=1
	;;
mirror | failover)
	cfg_mux root "$KIND" "a b"
	cfg_file a "$A"
	cfg_file b "$B"
	;;
*) fail "unknown kind $KIND" ;;
esac
replicas=("$A")
[ "$KIND" = mirror ] && replicas+=("$B")
mount_smux "$T/unl.conf" "$m"

# expect WHAT GOT WANT
expect() { [ "$2" = "$3" ] || fail "$KIND: $1: got '$2', want '$3'"; }

# py SCRIPT ARGS...: runs a python3 script; any exception fails the test
py() {
	local script=$1
	shift
	python3 -c "$script" "$@" || fail "$KIND: python: $script"
}

log "$KIND: open, write, unlink, fstat, write, read, close"
py '
import os, sys
p = sys.argv[1]
fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
assert os.write(fd, b"hello") == 5
os.unlink(p)
assert not os.path.exists(p), "the name is still there"
# the first lseek for data or a hole on this mount (stress-ng asks)
assert os.lseek(fd, 0, os.SEEK_DATA) == 0, "SEEK_DATA"
assert os.lseek(fd, 0, os.SEEK_HOLE) == 5, "SEEK_HOLE"
st = os.fstat(fd)
assert st.st_nlink == 0, "nlink %d after unlink" % st.st_nlink
assert st.st_size == 5, "size %d after unlink" % st.st_size
assert os.pread(fd, 100, 0) == b"hello"
assert os.pwrite(fd, b" world", 5) == 6
st = os.fstat(fd)
assert (st.st_nlink, st.st_size) == (0, 11), "after a write: %r" % (st,)
assert os.pread(fd, 100, 0) == b"hello world"
os.fchmod(fd, 0o600)
os.utime(fd, ns=(1500000000 * 10**9, 1500000000 * 10**9))
st = os.fstat(fd)
assert (st.st_mode & 0o7777, st.st_mtime) == (0o600, 1500000000), \
    "after fchmod, futimens: %r" % (st,)
os.fsync(fd)
os.close(fd)
' "$m/unl"
[ ! -e "$m/unl" ] || fail "$KIND: unl came back"
for r in "${replicas[@]}"; do
	# the backend's own temp directory may stay, empty
	expect "$r after close" "$(cd "$r" && find . -mindepth 1 ! -path ./.smuxfs-tmp)" ""
done

log "$KIND: fchown, fchmod, futimens of a nameless file, writer and reader"
printf 'owned\n' >"$m/own"
py '
import os, sys
p = sys.argv[1]
w = os.open(p, os.O_RDWR)
r = os.open(p, os.O_RDONLY)
os.unlink(p)
os.fchown(w, 1234, 5678)
st = os.fstat(w)
assert (st.st_uid, st.st_gid, st.st_nlink) == (1234, 5678, 0), \
    "writer after fchown: %r" % (st,)
assert (os.fstat(r).st_uid, os.fstat(r).st_gid) == (1234, 5678), \
    "reader after the writer fchown: %r" % (os.fstat(r),)
ct = st.st_ctime_ns
os.fchmod(r, 0o640)
os.fchown(r, -1, 4321)
os.utime(r, ns=(1400000000 * 10**9, 1500000000 * 10**9))
st = os.fstat(r)
assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o640, 1234, 4321), \
    "reader after fchmod, fchown: %r" % (st,)
assert (st.st_atime, st.st_mtime) == (1400000000, 1500000000), \
    "reader after futimens: %r" % (st,)
assert st.st_ctime_ns >= ct, "ctime went back: %r" % (st,)
assert os.fstat(w).st_mode & 0o7777 == 0o640, "writer: %r" % (os.fstat(w),)
assert os.pread(r, 100, 0) == b"owned\n"
os.close(w)
os.close(r)
' "$m/own"
[ ! -e "$m/own" ] || fail "$KIND: own came back"
for r in "${replicas[@]}"; do
	[ ! -e "$r/own" ] || fail "$KIND: $r/own came back"
done

log "$KIND: an existing file opened, then unlinked by another process"
printf 'old content\n' >"$m/kept"
py '
import os, subprocess, sys
p = sys.argv[1]
r = os.open(p, os.O_RDONLY)
w = os.open(p, os.O_WRONLY | os.O_APPEND)
subprocess.run(["rm", p], check=True)
st = os.fstat(r)
assert (st.st_nlink, st.st_size) == (0, 12), "reader: %r" % (st,)
st = os.fstat(w)
assert (st.st_nlink, st.st_size) == (0, 12), "writer: %r" % (st,)
assert os.pread(r, 100, 0) == b"old content\n"
assert os.write(w, b"more\n") == 5
assert os.fstat(r).st_size == 17
assert os.pread(r, 100, 0) == b"old content\nmore\n"
os.close(w)
os.close(r)
' "$m/kept"
[ ! -e "$m/kept" ] || fail "$KIND: kept came back"

log "$KIND: a reader across a rename-replace keeps the version it opened"
printf 'version one\n' >"$m/f"
printf 'version two, longer\n' >"$m/new"
py '
import os, subprocess, sys
p, new = sys.argv[1], sys.argv[2]
r = os.open(p, os.O_RDONLY)
assert os.read(r, 7) == b"version"
subprocess.run(["mv", new, p], check=True)
st = os.fstat(r)
assert (st.st_nlink, st.st_size) == (0, 12), "reader after mv: %r" % (st,)
assert os.pread(r, 100, 0) == b"version one\n"
assert os.read(r, 100) == b" one\n"
with open(p, "rb") as f:
    assert f.read() == b"version two, longer\n"
assert os.stat(p).st_nlink == 1
os.close(r)
' "$m/f" "$m/new"
expect "f after the reader closed" "$(cat "$m/f")" "version two, longer"

log "$KIND: a writer across a rename-replace writes into its own file"
printf 'writer one\n' >"$m/g"
printf 'new g\n' >"$m/g2"
py '
import os, subprocess, sys
p, new = sys.argv[1], sys.argv[2]
w = os.open(p, os.O_RDWR | os.O_APPEND)
assert os.write(w, b"a\n") == 2
subprocess.run(["mv", new, p], check=True)
assert os.write(w, b"b\n") == 2
st = os.fstat(w)
assert (st.st_nlink, st.st_size) == (0, 15), "writer after mv: %r" % (st,)
assert os.pread(w, 100, 0) == b"writer one\na\nb\n"
os.close(w)
with open(p, "rb") as f:
    assert f.read() == b"new g\n", "g was overwritten"
' "$m/g" "$m/g2"
for r in "${replicas[@]}"; do
	expect "$r/g" "$(cat "$r/g")" "new g"
done
rm "$m/f" "$m/g"

log "$KIND: tail -f follows a log removed while its writer appends"
exec 5>>"$m/log"
echo "line 1" >&5
tail -f -s 0.1 "$m/log" >"$T/tail.out" 2>"$T/tail.err" &
tailpid=$!
for _ in $(seq 1 100); do
	grep -qx "line 1" "$T/tail.out" && break
	sleep 0.1
done
rm "$m/log"
for i in 2 3 4; do
	echo "line $i" >&5
done
for _ in $(seq 1 100); do
	grep -qx "line 4" "$T/tail.out" && break
	sleep 0.1
done
exec 5>&-
kill -0 "$tailpid" 2>/dev/null || fail "$KIND: tail -f died: $(cat "$T/tail.err")"
kill "$tailpid"
wait "$tailpid" 2>/dev/null || true
expect "tail -f saw" "$(tr '\n' ' ' <"$T/tail.out")" "line 1 line 2 line 3 line 4 "
expect "tail -f said" "$(cat "$T/tail.err")" ""

if [ "$KIND" = file ]; then
	# another program renames the file in the backend directory and
	# removes it: the name the daemon knows is gone, the file is not
	log "file: a reader whose file is moved and removed behind the mount"
	echo start >"$m/moved"
	python3 -c '
import os, sys
m, a = sys.argv[1], sys.argv[2]
fd = os.open(m + "/moved", os.O_RDONLY)
assert os.read(fd, 100) == b"start\n"
os.rename(a + "/moved", a + "/moved2")
with open(a + "/moved2", "a") as f:
    f.write("more\n")
st = os.fstat(fd)
assert st.st_size == 11, "fstat after the move: %r" % (st,)
os.unlink(a + "/moved2")
# past the size the kernel knew: it asks the size (GETATTR, the handle)
got = os.pread(fd, 100, 0)
assert got == b"start\nmore\n", got
st = os.fstat(fd)
assert st.st_size == 11 and st.st_nlink == 0, "fstat after rm: %r" % (st,)
os.close(fd)
' "$m" "$A" || fail "file: a reader lost its file moved behind the mount"
fi

log "$KIND: two names of one file have one inode number"
echo linked >"$m/h1"
mkdir "$m/d"
ln "$m/h1" "$m/d/h2"
echo other >"$m/h3"
expect "nlink" "$(stat -c %h "$m/h1" "$m/d/h2" | tr '\n' ' ')" "2 2 "
expect "one inode" "$(stat -c %i "$m/h1")" "$(stat -c %i "$m/d/h2")"
[ "$(stat -c %i "$m/h1")" != "$(stat -c %i "$m/h3")" ] ||
	fail "$KIND: two files share an inode number"
[ "$(stat -c %i "$m/h1")" != "$(stat -c %i "$m/d")" ] ||
	fail "$KIND: a file and a directory share an inode number"
expect "find -samefile" "$(cd "$m" && find . -samefile h1 | sort | tr '\n' ' ')" \
	"./d/h2 ./h1 "
head -c 1048576 /dev/zero >"$m/big"
ln "$m/big" "$m/d/big2"
expect "du counts a linked file once" "$(du -s --block-size=1M "$m/big" "$m/d/big2" | awk '{ s += $1 } END { print s }')" 1
# an open descriptor sees the same inode as the names
py '
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
assert os.fstat(fd).st_ino == os.stat(sys.argv[2]).st_ino
os.close(fd)
' "$m/h1" "$m/d/h2"
ino=$(stat -c %i "$m/d/h2")
# a descriptor of a name that goes sees the names its file has left, as
# fstat on a local disk shows (nlink 1 with d/h2 left, 0 when that goes)
py '
import os, subprocess, sys
p, other = sys.argv[1], sys.argv[2]
r = os.open(p, os.O_RDONLY)
w = os.open(p, os.O_WRONLY | os.O_APPEND)
subprocess.run(["ln", other, other + "3"], check=True)
subprocess.run(["rm", p], check=True)
for fd in (r, w):
    assert os.fstat(fd).st_nlink == 2, "after rm of one of three names: %r" % (os.fstat(fd),)
subprocess.run(["rm", other + "3"], check=True)
for fd in (r, w):
    assert os.fstat(fd).st_nlink == 1, "one name left: %r" % (os.fstat(fd),)
subprocess.run(["ln", other, other + "4"], check=True)
assert os.fstat(r).st_nlink == 2, "after ln: %r" % (os.fstat(r),)
subprocess.run(["rm", other + "4"], check=True)
assert os.pread(r, 100, 0) == b"linked\n"
os.close(w)
os.close(r)
' "$m/h1" "$m/d/h2"
ln "$m/d/h2" "$m/h1"
rm "$m/h1"
expect "nlink after rm of the other name" "$(stat -c %h "$m/d/h2")" 1
for r in "${replicas[@]}"; do
	expect "$r/d/h2 nlink after rm" "$(stat -c %h "$r/d/h2")" 1
done
expect "content after rm" "$(cat "$m/d/h2")" linked
expect "the number after rm" "$(stat -c %i "$m/d/h2")" "$ino"

# a writer whose name goes and comes back (ln, rm, mv of the new name
# to the old): a writer opened on the name since reads what the first one
# writes (failover kept a spool of the file, empty when it opened, which
# the first writer, nameless, never changed: reads of 0 bytes, SIGBUS).
# Not staged: each staged writer holds a copy of its own (a tree that
# cannot write in place has no hard links)
if [ "$KIND" != staging ]; then
log "$KIND: a writer opened on a name its nameless writer's file came back to"
py '
import mmap, os, sys
d = sys.argv[1]
p = d + "/relinked"
w0 = os.open(p, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
os.link(p, d + "/relinked2")
os.unlink(p)
os.rename(d + "/relinked2", p)
w1 = os.open(p, os.O_RDWR)
os.write(w0, b"x" * 70000)
r = os.open(p, os.O_RDONLY)
for fd in (w1, r):
    assert os.fstat(fd).st_size == 70000, os.fstat(fd)
    got = os.pread(fd, 100000, 0)
    assert got == b"x" * 70000, "read %d bytes" % len(got)
m = mmap.mmap(w1, 0)
m[57187] = 65
m.flush()
m.close()
os.pwrite(w1, b"B", 7)
for fd in (w1, r):
    got = os.pread(fd, 100000, 0)
    assert len(got) == 70000 and got[57187:57188] == b"A" and got[7:8] == b"B", len(got)
for fd in (w0, w1, r):
    os.close(fd)
with open(p, "rb") as f:
    got = f.read()
assert len(got) == 70000 and got[57187:57188] == b"A" and got[7:8] == b"B", len(got)
' "$m"
for r in "${replicas[@]}"; do
	expect "$r/relinked size" "$(stat -c %s "$r/relinked")" 70000
done
fi

# rename(2) of a name over another name of its file when both names are
# open does nothing; the name renamed is the one the kernel then unlinks:
# fstat, fchmod and mmap through the descriptors of the first name work
# (the daemon knew them by the name that stays; libfuse had no path for
# their node: ESTALE)
log "$KIND: descriptors of a name renamed over an open name of its file"
mkdir "$m/same"
py '
import mmap, os, sys
d = sys.argv[1]
w = os.open(d + "/e", os.O_WRONLY | os.O_CREAT, 0o644)
os.write(w, b"hello")
r = os.open(d + "/e", os.O_RDONLY)
os.rename(d + "/e", d + "/a")
os.link(d + "/a", d + "/b")
w3 = os.open(d + "/b", os.O_WRONLY)
os.rename(d + "/a", d + "/b")
assert sorted(os.listdir(d)) == ["a", "b"], os.listdir(d)
os.unlink(d + "/b")
assert os.listdir(d) == ["a"], os.listdir(d)
for fd in (r, w):
    st = os.fstat(fd)
    assert (st.st_size, st.st_nlink) == (5, 1), st
m = mmap.mmap(r, 0, prot=mmap.PROT_READ)
assert m[:] == b"hello", m[:]
m.close()
os.fchmod(r, 0o640)
assert os.stat(d + "/a").st_mode & 0o777 == 0o640, oct(os.stat(d + "/a").st_mode)
os.pwrite(w, b"HE", 0)
assert os.pread(r, 10, 0) == b"HEllo"
for fd in (w, r, w3):
    os.close(fd)
with open(d + "/a", "rb") as f:
    assert f.read() == b"HEllo"
assert os.stat(d + "/a").st_nlink == 1
' "$m/same"
for r in "${replicas[@]}"; do
	expect "$r/same" "$(ls "$r/same" | tr '\n' ' ')" "a "
	expect "$r/same/a" "$(cat "$r/same/a")" HEllo
done

unmount_smux "$m"
log "$KIND: ok"
