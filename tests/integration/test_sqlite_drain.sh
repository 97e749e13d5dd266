#!/usr/bin/env bash
# test_sqlite_drain.sh - a program holding a file open keeps seeing one
# inode number for it while the tree's replicas come and go (s44-t4). A
# file's st_ino is its identity in the backend, so that every name of a
# hard-linked file shows one (rsync -H, tar); in a mirror each replica is
# another file of another file system, and the one that answers changes:
# the next one up while the first is drained, a new file once a replay
# rewrote the first's copy. sqlite checks before every write transaction
# that its database's path still names the file it holds (st_ino of the
# path against its descriptor's) and refused every insert with "attempt
# to write a readonly database" (SQLITE_READONLY_DBMOVED) while the first
# member was drained. An open file now shows the number it showed first
# for as long as it is open. A mirror, rollback journal and WAL, a drain
# and an undrain of the first member mid-run. (Not failover: there a file
# lives on the first member only, and a drain of it takes its files away
# until the undrain, docs/modes.md.)
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || fail "python3 missing"

run_case() {
	local mode=$1 jmode=$2 M=$T/mnt-$1-$2
	new_config "$T/$mode-$jmode.conf" m
	cfg_mux m "$mode" "r1 r2"
	cfg_file r1 "$T/$mode-$jmode/r1"
	cfg_file r2 "$T/$mode-$jmode/r2"
	mount_smux "$T/$mode-$jmode.conf" "$M"
	timeout 120 python3 - "$M/db" "$M/.smux/ctl" "$jmode" >"$T/out" 2>&1 <<'PY' ||
import os, sqlite3, sys, time
db, ctl, jmode = sys.argv[1:4]
c = sqlite3.connect(db)
c.execute("pragma journal_mode=%s" % jmode)
c.execute("create table t(a)")
c.commit()
fd = os.open(db, os.O_RDONLY)
ino = os.fstat(fd).st_ino
bad = []
def step(tag):
    try:
        for i in range(20):
            c.execute("insert into t values(?)", (tag,))
            c.commit()
    except sqlite3.Error as e:
        bad.append("%s: insert failed: %s" % (tag, e))
    p, d = os.stat(db).st_ino, os.fstat(fd).st_ino
    if p != ino or d != ino:
        bad.append("%s: st_ino of the path %d, of the descriptor %d, at open %d" % (tag, p, d, ino))
def ctl_write(cmd):
    with open(ctl, "w") as f:
        f.write(cmd + "\n")
step("before")
ctl_write("drain r1")
step("drained")
ctl_write("undrain r1")
time.sleep(2)  # the replay rewrites r1's copies meanwhile
step("undrained")
n = c.execute("select count(*) from t").fetchone()[0]
if n != 60:
    bad.append("%d rows, not 60" % n)
c.close()
os.close(fd)
print("\n".join(bad) if bad else "ok")
sys.exit(1 if bad else 0)
PY
		fail "$mode, journal_mode $jmode: $(tr '\n' ';' <"$T/out")"
	log "$mode, journal_mode $jmode: $(cat "$T/out")"
	repair_settled "$M" 30
	[ "$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from t').fetchone()[0])" "$M/db")" = 60 ] ||
		fail "$mode, $jmode: a new connection does not read 60 rows"
	unmount_smux "$M"
	cmp -s "$T/$mode-$jmode/r1/db" "$T/$mode-$jmode/r2/db" ||
		fail "$mode, $jmode: the replicas of db differ"
}

run_case mirror delete
run_case mirror wal

# The number stays when the tree drops to one copy while the database is
# open (reviewer: the pin was decided at each call, and a mirror left
# with one member is a tree of one copy).
new_config "$T/rm.conf" m
cfg_mux m mirror "r1 r2"
cfg_file r1 "$T/rm/r1"
cfg_file r2 "$T/rm/r2"
M=$T/mnt-rm
mount_smux "$T/rm.conf" "$M"
timeout 120 python3 - "$M/db" "$M/.smux/ctl" >"$T/out" 2>&1 <<'PY' ||
import os, sqlite3, sys
db, ctl = sys.argv[1:3]
c = sqlite3.connect(db)
c.execute("create table t(a)")
c.commit()
fd = os.open(db, os.O_RDONLY)
ino = os.fstat(fd).st_ino
with open(ctl, "w") as f:
    f.write("remove r1\n")
bad = []
try:
    for i in range(20):
        c.execute("insert into t values(?)", (i,))
        c.commit()
except sqlite3.Error as e:
    bad.append("insert after remove r1: %s" % e)
if os.stat(db).st_ino != ino:
    bad.append("st_ino of the path changed with the remove")
c.close()
os.close(fd)
print("\n".join(bad) if bad else "ok")
sys.exit(1 if bad else 0)
PY
	fail "remove: $(tr '\n' ';' <"$T/out")"
log "mirror, remove r1 while open: $(cat "$T/out")"
unmount_smux "$M"
