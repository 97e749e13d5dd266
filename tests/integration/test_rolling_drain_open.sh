#!/usr/bin/env bash
# test_rolling_drain_open.sh - files opened while a replica of a mirror is
# drained, kept open through a rolling drain (undrain it, drain the
# other): a file created then (git's index.lock, sqlite's journal), an
# existing one opened for appending then, and a sqlite database in WAL
# mode opened then. Every write and the close succeed, the content reads
# back whole, and once both are up both replicas hold it, with the
# creator's mode. The writer had no writer on the replica drained at its
# open, so it never took it back: at the other's drain it had no replica
# left, and the writes and the close failed (EIO; s45-t4: git clone and
# sqlite failed).
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" root
cfg_mux root mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
M=$T/mnt
mkdir -p "$T/a" "$T/b"
for f in old.log old2.log; do
	printf 'old line\n' >"$T/a/$f"
	printf 'old line\n' >"$T/b/$f"
done
mount_smux "$T/c.conf" "$M"

timeout -k 5 120 python3 - "$M" "$T" <<'PY' || fail "a rolling drain with files opened while a was drained"
import json, os, stat, sys, time
M, T = sys.argv[1:3]
os.umask(0)
def ctl(c):
    with open(M + "/.smux/ctl", "w") as h:
        h.write(c + "\n")
bad = []
def step(fd, tag, what):
    # distinct content per step: a copy at a wrong offset shows
    try:
        os.write(fd, (tag * 100000).encode())
    except OSError as e:
        bad.append("%s: %s" % (what, e))
    return tag * 100000
for busy in (True, False):  # a write between a's undrain and b's drain, or none
    sfx = "busy" if busy else "idle"
    ctl("drain a")
    os.mkdir(M + "/d-" + sfx)  # a directory made while a is drained
    names = ("new-%s.lock" % sfx, "old.log" if busy else "old2.log",
             "d-%s/in-dir" % sfx)
    fds = [os.open(M + "/" + names[0], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644),
           os.open(M + "/" + names[1], os.O_WRONLY | os.O_APPEND),
           os.open(M + "/" + names[2], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)]
    want = ["", "old line\n", ""]
    # an xattr given while a is drained: the join carries it to a
    os.setxattr(M + "/" + names[0], "user.tag", sfx.encode())
    for i, fd in enumerate(fds):
        want[i] += step(fd, "1", "%s, a drained" % names[i])
    ctl("undrain a")
    time.sleep(0.3)
    if busy:
        for i, fd in enumerate(fds):
            want[i] += step(fd, "2", "%s, both up" % names[i])
    ctl("drain b")
    for i, fd in enumerate(fds):
        want[i] += step(fd, "3", "%s, b drained" % names[i])
    for i, fd in enumerate(fds):
        try:
            os.close(fd)
        except OSError as e:
            bad.append("close of %s: %s" % (names[i], e))
    # a took the writes: its copy is whole and has the creator's mode
    for i, n in enumerate(names):
        try:
            got = open(T + "/a/" + n).read()
        except OSError as e:
            got = str(e)
        if got != want[i]:
            bad.append("%s on a (%s): %d bytes, want %d" % (n, sfx, len(got), len(want[i])))
    for n, mode in ((names[0], 0o644), (names[2], 0o640)):
        try:
            m = stat.S_IMODE(os.stat(T + "/a/" + n).st_mode)
        except OSError:
            m = -1
        if m != mode:
            bad.append("%s on a: mode %o, want %o" % (n, m, mode))
    try:
        tag = os.getxattr(T + "/a/" + names[0], "user.tag")
    except OSError as e:
        tag = str(e).encode()
    if tag != sfx.encode():
        bad.append("%s on a: user.tag %r, want %r" % (names[0], tag, sfx))
    ctl("undrain b")
    for i, n in enumerate(names):
        if open(M + "/" + n).read() != want[i]:
            bad.append("%s through the mount (%s) differs" % (n, sfx))
if bad:
    sys.exit("; ".join(bad))
PY

# git's index.lock: written whole while a is drained, closed after a's
# undrain and b's drain with no call in between, then renamed over the
# index: the close had no replica to commit on (EIO) and the rename
# found no file (s46-t1)
timeout -k 5 60 python3 - "$M" <<'PY' || fail "a lock file written while a was drained, closed after b's drain"
import os, sys
M = sys.argv[1]
def ctl(c):
    with open(M + "/.smux/ctl", "w") as h:
        h.write(c + "\n")
ctl("drain a")
fd = os.open(M + "/index.lock", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"index " * 50000)
ctl("undrain a")
ctl("drain b")
os.close(fd)
os.rename(M + "/index.lock", M + "/index")
ctl("undrain b")
assert open(M + "/index", "rb").read() == b"index " * 50000
PY

# sqlite's journal: written and fsync'd while a is drained, closed with
# no write after a's undrain and b's drain - nothing to commit at the
# close, and no call took a in: a stayed hinted for it, b (drained) held
# the only copy, and the next open of it failed EIO until b's undrain
# (s47, a drain/undrain storm under sqlite)
timeout -k 5 60 python3 - "$M" "$T" <<'PY' || fail "a file fsync'd while a was drained, closed after b's drain with no write"
import os, sys
M, T = sys.argv[1:3]
def ctl(c):
    with open(M + "/.smux/ctl", "w") as h:
        h.write(c + "\n")
ctl("drain a")
fd = os.open(M + "/j-journal", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"journal " * 40000)
os.fsync(fd)
ctl("undrain a")
ctl("drain b")
os.close(fd)
try:
    got = open(M + "/j-journal", "rb").read()
except OSError as e:
    got = str(e).encode()
ctl("undrain b")
assert got == b"journal " * 40000, "read with b drained: %r" % got[:60]
assert open(T + "/a/j-journal", "rb").read() == got, "a's copy differs"
# a's copy has b's mtime (the join's commit): the replicas agree
ma, mb = (os.stat(T + "/%s/j-journal" % r).st_mtime_ns for r in "ab")
assert ma == mb, "mtime on a %d, on b %d" % (ma, mb)
PY
repair_settled "$M" 20
diff -r "$T/a" "$T/b" || fail "replicas a and b differ"
for f in new-busy.lock new-idle.lock d-busy/in-dir d-idle/in-dir old.log old2.log j-journal; do
	cmp "$M/$f" "$T/a/$f" || fail "$f through the mount differs from a's"
	[ "$(stat -c %a "$T/a/$f")" = "$(stat -c %a "$T/b/$f")" ] || fail "$f: modes on a and b differ"
done
log "files created or appended while a was drained, through a rolling drain: whole on both"

# sqlite in WAL mode, the database opened while a is drained, an insert
# at every step of a rolling drain (the WAL and its index are the files
# held open)
timeout -k 5 120 python3 - "$M" <<'PY' || fail "sqlite (WAL) opened while a was drained"
import os, sqlite3, sys
M = sys.argv[1]
def ctl(c):
    with open(M + "/.smux/ctl", "w") as h:
        h.write(c + "\n")
db = M + "/db"
c0 = sqlite3.connect(db, isolation_level=None)
c0.execute("pragma journal_mode=wal")
c0.execute("create table t(a)")
c0.close()
ctl("drain a")
c = sqlite3.connect(db, isolation_level=None)
errs = []
for step in ("ins", "undrain a", "ins", "drain b", "ins", "undrain b", "ins"):
    if step != "ins":
        ctl(step)
        continue
    try:
        c.execute("insert into t values(1)")
    except Exception as e:
        errs.append(str(e))
n = c.execute("select count(*) from t").fetchone()[0]
ok = c.execute("pragma integrity_check").fetchone()[0]
c.close()
if errs or n != 4 or ok != "ok":
    sys.exit("errors %s, rows %d, integrity %s" % (errs, n, ok))
PY
repair_settled "$M" 20
log "sqlite (WAL) opened while a was drained: 4 inserts through the rolling drain"

# An undrain followed at once by the other's drain (no pause): the
# background replay the undrain started copied from the member being
# drained, was refused (BACKEND_DRAINING), and the drain did not wait for
# it - a file written while b was drained read EIO until a's undrain
# (s46-t1; old)
timeout -k 5 60 python3 - "$M" <<'PY' || fail "undrain b, drain a at once: a file written while b was drained"
import os, sys, time
M = sys.argv[1]
def ctl(c):
    with open(M + "/.smux/ctl", "w") as h:
        h.write(c + "\n")
for i in range(5):
    p = M + "/quick%d" % i
    open(p, "wb").write(b"orig\n")
    ctl("drain b")
    open(p, "wb").write(b"new\n")
    ctl("undrain b")
    ctl("drain a")
    try:
        got = open(p, "rb").read()
    except OSError as e:
        got = str(e).encode()
    ctl("undrain a")
    if got != b"new\n":
        sys.exit("round %d: %r with a drained" % (i, got))
PY
repair_settled "$M" 20
unmount_smux "$M"

# A join that fails counts at the close as the replica still drained
# would: not at all. write_quorum = 2 lets a close through while a
# replica is drained (the write reached every replica in service); a's
# join here fails (its copy of f has another name there, g, and a hint
# pending for f: a copy into it would change g on a alone), and counted
# as a replica that missed the write, it failed that close with EIO.
new_config "$T/q.conf" root
cfg_mux root mirror "a b" write_quorum=2
cfg_file a "$T/qa"
cfg_file b "$T/qb"
mount_smux "$T/q.conf" "$M"
echo 1 >"$M/f"
ln "$M/f" "$M/g" || fail "ln f g"
echo "drain a" >"$M/.smux/ctl"
echo 2 >>"$M/f" || fail "an append with a drained"
timeout -k 5 60 python3 - "$M" <<'PY' || fail "a failed join failed the close under write_quorum = 2"
import os, sys
M = sys.argv[1]
def ctl(c):
    with open(M + "/.smux/ctl", "w") as h:
        h.write(c + "\n")
fd = os.open(M + "/f", os.O_WRONLY | os.O_APPEND)
ctl("undrain a")
os.write(fd, b"3\n")  # a's join is tried here, and fails
os.close(fd)
PY
repair_settled "$M" 20
[ "$(cat "$M/f")" = "$(printf '1\n2\n3')" ] || fail "f: $(cat "$M/f" | tr '\n' ' ')"
cmp "$T/qa/f" "$T/qb/f" || fail "the replicas of f differ"
unmount_smux "$M"
