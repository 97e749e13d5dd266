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
printf 'old line\n' >"$T/a/old.log"
printf 'old line\n' >"$T/b/old.log"
mount_smux "$T/c.conf" "$M"

timeout -k 5 120 python3 - "$M" <<'PY' || fail "a rolling drain with files opened while a was drained"
import os, sys, time
M = sys.argv[1]
def ctl(c):
    with open(M + "/.smux/ctl", "w") as h:
        h.write(c + "\n")
chunk = b"x" * 200000  # git writes its index in large pieces
bad = []
def w(fd, what):
    try:
        os.write(fd, chunk)
    except OSError as e:
        bad.append("%s: %s" % (what, e))
ctl("drain a")
new = os.open(M + "/new.lock", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
old = os.open(M + "/old.log", os.O_WRONLY | os.O_APPEND)
for fd in (new, old):
    w(fd, "a drained")
ctl("undrain a")
time.sleep(0.3)
for fd in (new, old):
    w(fd, "both up")
ctl("drain b")
for fd in (new, old):
    w(fd, "b drained")
for fd, name in ((new, "new.lock"), (old, "old.log")):
    try:
        os.close(fd)
    except OSError as e:
        bad.append("close of %s: %s" % (name, e))
ctl("undrain b")
sizes = (os.stat(M + "/new.lock").st_size, os.stat(M + "/old.log").st_size)
if sizes != (3 * len(chunk), 9 + 3 * len(chunk)):
    bad.append("sizes %s" % (sizes,))
if bad:
    sys.exit("; ".join(bad))
PY
repair_settled "$M" 20
for f in new.lock old.log; do
	cmp "$T/a/$f" "$T/b/$f" || fail "replicas a and b differ on $f"
	cmp "$M/$f" "$T/a/$f" || fail "$f through the mount differs from a's"
done
[ "$(stat -c %a "$T/a/new.lock")" = 600 ] ||
	fail "new.lock on a (joined late): mode $(stat -c %a "$T/a/new.lock"), want 600"
log "a created file and an appended one, opened while a was drained: whole on both"

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
unmount_smux "$M"
log "sqlite (WAL) opened while a was drained: 4 inserts through the rolling drain"
