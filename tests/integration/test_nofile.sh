#!/usr/bin/env bash
# test_nofile.sh KIND - the daemon out of file descriptors (its
# RLIMIT_NOFILE lowered to 160 under a mirror, failover or single file
# backend): an open that finds none left fails with EMFILE ("Too many
# open files", as a local program would see its own limit), never EIO;
# the members stay up (the limit is the daemon's, not the storage's), so
# files already open keep working, and once descriptors are closed new
# opens and writes work at once. The daemon's EMFILE once counted as a
# member failure: the members went down and every file answered EIO.
#
# Runs as root (prlimit on the daemon), like CI.
. "$(dirname "$0")/lib.sh"

KIND=${1:-mirror}
new_config "$T/c.conf" root
if [ "$KIND" = file ]; then
	cfg_file root "$T/a"
else
	cfg_mux root "$KIND" "a b" cooldown=30s
	cfg_file a "$T/a"
	cfg_file b "$T/b"
fi
M=$T/mnt
mount_smux "$T/c.conf" "$M"
echo keep >"$M/other"
pid=$(daemon_pids_for "$M" | head -1)
[ -n "$pid" ] || fail "$KIND: no daemon pid for $M"
prlimit --pid "$pid" --nofile=160:160 || fail "$KIND: prlimit on the daemon"

python3 - "$M" "$KIND" <<'PY' || fail "$KIND: the errors above"
import errno, json, os, resource, sys
m, kind = sys.argv[1], sys.argv[2]
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
def members_up(when):
    if kind == "file":
        return
    with open(os.path.join(m, ".smux/stats")) as f:
        st = json.load(f)
    down = [b["name"] for b in st["backends"] if b["status"] != "up"]
    if down:
        sys.exit("%s: members %s are down" % (when, down))
fds, failed = [], None
for i in range(400):
    try:
        fd = os.open(os.path.join(m, "w%03d" % i), os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"line %d\n" % i)
        fds.append(fd)
    except OSError as e:
        failed = e
        break
if failed is None:
    sys.exit("400 writers open with a daemon limit of 160 descriptors")
if failed.errno not in (errno.EMFILE, errno.ENFILE):
    sys.exit("open %d with the daemon out of descriptors: %s, not EMFILE"
             % (len(fds), failed))
print("writer %d: %s" % (len(fds), failed))
members_up("out of descriptors")
# what is open keeps working
for fd in fds[:5]:
    os.write(fd, b"more\n")
# a read of another file: EMFILE again, or its content; never EIO
try:
    with open(os.path.join(m, "other")) as f:
        if f.read() != "keep\n":
            sys.exit("another file read back wrong while out of descriptors")
except OSError as e:
    if e.errno not in (errno.EMFILE, errno.ENFILE):
        sys.exit("read of another file while out of descriptors: %s" % e)
members_up("after a read while out of descriptors")
for fd in fds:
    os.close(fd)
# descriptors back: everything works at once
with open(os.path.join(m, "other")) as f:
    if f.read() != "keep\n":
        sys.exit("another file read back wrong after the descriptors closed")
with open(os.path.join(m, "after"), "w") as f:
    f.write("after\n")
members_up("after the descriptors closed")
for i in range(len(fds)):
    want = b"line %d\n" % i + (b"more\n" if i < 5 else b"")
    with open(os.path.join(m, "w%03d" % i), "rb") as f:
        got = f.read()
    if got != want:
        sys.exit("w%03d read back %r, not %r" % (i, got, want))
PY
[ "$(cat "$M/after")" = after ] || fail "$KIND: a write after the descriptors closed"
ls "$M" >"$T/names"
unmount_smux "$M"
# the open that failed left no file behind, or one on every replica
if [ "$KIND" = mirror ]; then
	diff -r "$T/a" "$T/b" || fail "$KIND: the replicas differ"
fi
diff <(ls "$T/a") "$T/names" || fail "$KIND: the backend lists other names than the mount did"
for d in a b; do
	[ "$KIND" = mirror ] || [ "$d" = a ] || continue
	cmp -s "$T/$d/after" <(echo after) || fail "$KIND: $d/after not stored"
	[ "$(cat "$T/$d/w000")" = "$(printf 'line 0\nmore')" ] ||
		fail "$KIND: $d/w000 holds $(cat "$T/$d/w000")"
done
log "$KIND: ok"
