#!/usr/bin/env bash
# test_local.sh KIND - the mount behaves like a local filesystem where its
# backends are local directories (issue 8), over a file backend (file), a
# mirror of two (mirror) and a failover of two (failover):
#   - appends are written in place: 50 `echo >>` to a 100 MiB file keep
#     the backing file's inode on every replica (no copy, no rename) and
#     land in order;
#   - O_APPEND lands at the end as it is then: lines appended alternately
#     through the mount and straight into the backing file (a second
#     writer on the same storage) all arrive, in order (file, failover);
#   - `tail -f` follows a growing log, appended through the mount and
#     behind it, without "Stale file handle", also while the mount holds
#     the log open for appending (stat and cat show what landed behind it);
#   - an open with O_TRUNC shows size 0 at once (fstat and stat);
#   - O_EXCL and O_CREAT without O_TRUNC are honoured when the file
#     appeared behind a cached negative lookup (its content, owner and
#     mode kept);
#   - a file unlinked while open stays usable through its descriptor
#     (read, write, fstat with nlink 0; more in test_unlinked.sh);
#   - a failed unlink (the backing directory is immutable) leaves an open
#     writer's data and its close() result intact (file);
#   - a handle that only reads never commits: its close publishes nothing;
#   - a chmod of the backing file while the mount holds it open for
#     appending stands after the close (file: nothing but what the caller
#     chose is applied over the file);
#   - a write leaves the storage's mtime and ctime as it made them (file);
#   - a written file's mode and times reach the storage while the mount
#     is up and another handle keeps the file open, and an unmount right
#     after `cp -p` loses neither (file: the commit follows the release);
#   - a sparse file shows the blocks the storage holds (st_blocks, du),
#     holes filled in place too, at once, while the file is open elsewhere,
#     not its size in blocks.
. "$(dirname "$0")/lib.sh"

KIND=${1:-file}
m=$T/mnt
A=$T/a
B=$T/b

new_config "$T/local.conf" root negative_timeout=30s entry_timeout=30s
case $KIND in
file) cfg_file root "$A" ;;
mirror | failover)
	cfg_mux root "$KIND" "a b"
	cfg_file a "$A"
	cfg_file b "$B"
	;;
*) fail "unknown kind $KIND" ;;
esac
replicas=("$A")
[ "$KIND" = file ] || replicas+=("$B")
mount_smux "$T/local.conf" "$m"

ino() { stat -c %i "$1"; }

log "$KIND: 50 appends to a 100 MiB file are written in place"
head -c $((100 << 20)) /dev/zero >"$m/big"
declare -A before
for r in "${replicas[@]}"; do
	if [ "$KIND" = failover ] && [ "$r" = "$B" ]; then
		continue # a standby gets what failover writes only on a hint
	fi
	before[$r]=$(ino "$r/big")
done
for i in $(seq 1 50); do echo "line $i" >>"$m/big"; done
for r in "${!before[@]}"; do
	[ "$(ino "$r/big")" = "${before[$r]}" ] ||
		fail "$KIND: $r/big was replaced (inode changed): appends copy the file"
	seq 1 50 | sed 's/^/line /' >"$T/tail-want"
	tail -c "$(wc -c <"$T/tail-want")" "$r/big" >"$T/tail-r"
	cmp -s "$T/tail-r" "$T/tail-want" || fail "$KIND: appended lines on $r"
done
[ "$(stat -c %s "$m/big")" = $(((100 << 20) + $(cat "$T/tail-want" | wc -c))) ] ||
	fail "$KIND: size after appends"
rm "$m/big"

if [ "$KIND" != mirror ]; then
	log "$KIND: appends through the mount and behind it interleave"
	: >"$m/two"
	for i in $(seq 1 20); do
		if [ $((i % 2)) -eq 1 ]; then
			echo "line $i" >>"$m/two"
		else
			echo "line $i" >>"$A/two"
		fi
	done
	seq 1 20 | sed 's/^/line /' >"$T/two-want"
	cmp -s "$A/two" "$T/two-want" ||
		fail "$KIND: backend lost appends: $(diff "$T/two-want" "$A/two" | head -5)"
	sleep 1.2 # the attribute timeout: the kernel learns the new size
	cmp -s "$m/two" "$T/two-want" ||
		fail "$KIND: mount shows lost appends: $(diff "$T/two-want" "$m/two" | head -5)"
	rm "$m/two"
fi

log "$KIND: tail -f follows a growing log"
echo "start" >"$m/log"
tail -f "$m/log" >"$T/tail.out" 2>"$T/tail.err" &
tailpid=$!
sleep 0.5
for i in $(seq 1 6); do
	if [ "$KIND" != mirror ] && [ $((i % 3)) -eq 0 ]; then
		echo "entry $i" >>"$A/log" # behind the mount
	else
		echo "entry $i" >>"$m/log"
	fi
	sleep 0.3
done
for _ in $(seq 1 40); do
	grep -qx "entry 6" "$T/tail.out" && break
	sleep 0.25
done
kill -0 "$tailpid" 2>/dev/null || fail "$KIND: tail -f died: $(cat "$T/tail.err")"
kill "$tailpid"
wait "$tailpid" 2>/dev/null || true
{ echo start; seq 1 6 | sed 's/^/entry /'; } >"$T/tail.want"
cmp -s "$T/tail.out" "$T/tail.want" ||
	fail "$KIND: tail -f saw: $(tr '\n' '|' <"$T/tail.out") err: $(cat "$T/tail.err")"
[ ! -s "$T/tail.err" ] || fail "$KIND: tail -f said: $(cat "$T/tail.err")"

# The same with the log held open for appending through the mount (a
# daemon's log): what lands behind the mount shows in stat, cat and
# tail -f while the mount's writer still holds the file, and the writer's
# next O_APPEND write (placed by the kernel at the size it knew) does not
# hide it.
if [ "$KIND" != mirror ]; then
	log "$KIND: tail -f, stat and cat follow a log held open for appending"
	echo "held 0" >"$m/hlog"
	exec 3>>"$m/hlog"
	tail -f "$m/hlog" >"$T/htail.out" 2>"$T/htail.err" &
	tailpid=$!
	sleep 0.5
	for i in $(seq 1 6); do
		if [ $((i % 2)) -eq 1 ]; then
			echo "held $i" >>"$A/hlog" # behind the mount
		else
			echo "held $i" >&3
		fi
		sleep 0.3
	done
	echo "held 7" >>"$A/hlog"
	ok=
	for _ in $(seq 1 40); do
		if grep -qx "held 7" "$T/htail.out" &&
			[ "$(stat -c %s "$m/hlog")" = "$(stat -c %s "$A/hlog")" ]; then
			ok=1
			break
		fi
		sleep 0.25
	done
	seq 0 7 | sed 's/^/held /' >"$T/htail.want"
	[ -n "$ok" ] || fail "$KIND: held log: size $(stat -c %s "$m/hlog") through the mount, $(stat -c %s "$A/hlog") stored; tail -f saw: $(tr '\n' '|' <"$T/htail.out")"
	cmp -s "$m/hlog" "$T/htail.want" ||
		fail "$KIND: held log reads back as: $(tr '\n' '|' <"$m/hlog")"
	exec 3>&-
	kill "$tailpid"
	wait "$tailpid" 2>/dev/null || true
	cmp -s "$T/htail.out" "$T/htail.want" ||
		fail "$KIND: tail -f of a held log saw: $(tr '\n' '|' <"$T/htail.out") err: $(cat "$T/htail.err")"
	cmp -s "$A/hlog" "$T/htail.want" ||
		fail "$KIND: held log stored as: $(tr '\n' '|' <"$A/hlog")"
	rm "$m/hlog"
fi

log "$KIND: an open with O_TRUNC shows size 0 at once"
head -c 150000 /dev/urandom >"$m/trunc"
perl -e '
	use Fcntl;
	my $p = $ARGV[0];
	sysopen(my $f, $p, O_RDWR | O_TRUNC) or die "open: $!";
	my @st = stat($f) or die "fstat: $!";
	$st[7] == 0 or die "fstat size $st[7] after O_TRUNC\n";
	@st = stat($p) or die "stat: $!";
	$st[7] == 0 or die "stat size $st[7] after O_TRUNC\n";
	syswrite($f, "abc") == 3 or die "write: $!";
	@st = stat($p);
	$st[7] == 3 or die "stat size $st[7] after a write of 3\n";
' "$m/trunc" || fail "$KIND: O_TRUNC open"
rm "$m/trunc"

log "$KIND: O_EXCL and O_CREAT honour a file that appeared meanwhile"
ls "$m/late" 2>/dev/null && fail "late exists already"
for r in "${replicas[@]}"; do echo x >"$r/late"; done
if (set -C && echo y >"$m/late") 2>/dev/null; then
	fail "$KIND: O_EXCL create succeeded over a file that appeared"
fi
echo z >>"$m/late"
[ "$(cat "$A/late")" = "$(printf 'x\nz')" ] ||
	fail "$KIND: O_CREAT without O_TRUNC lost the file: $(cat "$A/late")"
rm "$m/late"
# the same with no O_EXCL try first (which makes the kernel look again):
# the kernel sends CREATE for a name it still holds absent, and the file
# keeps its owner and mode as well, as open(2) of an existing file does
# (the create's were given to it: root's 644)
ls "$m/late2" 2>/dev/null && fail "late2 exists already"
for r in "${replicas[@]}"; do
	echo x >"$r/late2"
	chown 1000:1000 "$r/late2"
	chmod 0640 "$r/late2"
done
echo z >>"$m/late2"
[ "$(cat "$A/late2")" = "$(printf 'x\nz')" ] ||
	fail "$KIND: O_CREAT without O_TRUNC lost the file: $(cat "$A/late2")"
for r in "${replicas[@]}" "$m"; do
	[ "$(stat -c '%a %u:%g' "$r/late2")" = "640 1000:1000" ] ||
		fail "$KIND: O_CREAT of a file that appeared changed $r/late2 to $(stat -c '%a %u:%g' "$r/late2")"
done
rm "$m/late2"

log "$KIND: a file unlinked while open stays usable"
perl -e '
	use Fcntl qw(SEEK_SET);
	my $p = $ARGV[0];
	open(my $f, "+>", $p) or die "open: $!";
	syswrite($f, "hello") == 5 or die "write: $!";
	unlink($p) or die "unlink: $!";
	-e $p and die "still there\n";
	my @st = stat($f) or die "fstat: $!";
	$st[3] == 0 && $st[7] == 5 or die "fstat: nlink $st[3] size $st[7]\n";
	sysseek($f, 0, SEEK_SET);
	my $buf; sysread($f, $buf, 100) == 5 or die "read: $!";
	$buf eq "hello" or die "read back \"$buf\"\n";
	syswrite($f, " world") == 6 or die "write after unlink: $!";
	sysseek($f, 0, SEEK_SET);
	sysread($f, $buf, 100); $buf eq "hello world" or die "got \"$buf\"\n";
	close($f) or die "close: $!";' "$m/unl" || fail "$KIND: unlinked open file"

if [ "$KIND" = file ]; then
	log "$KIND: a failed unlink keeps an open writer's data"
	mkdir "$m/imm"
	echo first >"$m/imm/f"
	exec 7>>"$m/imm/f"
	echo second >&7
	chattr +i "$A/imm"
	if rm "$m/imm/f" 2>/dev/null; then
		chattr -i "$A/imm"
		exec 7>&-
		fail "$KIND: unlink in an immutable directory succeeded"
	fi
	echo third >&7
	if ! exec 7>&-; then
		chattr -i "$A/imm"
		fail "$KIND: close after a failed unlink failed"
	fi
	chattr -i "$A/imm"
	[ "$(cat "$m/imm/f")" = "$(printf 'first\nsecond\nthird')" ] ||
		fail "$KIND: writer's data after a failed unlink: $(cat "$m/imm/f")"
	rm -r "$m/imm"
fi

# On a tree of one copy only: on several, the commit gives every replica
# the mode (a failover writer that moved made its file on the next member)
# and so undoes a chmod made behind the mount meanwhile (still open).
if [ "$KIND" = file ]; then
	log "$KIND: a chmod behind the mount while a file is open for append stands"
	echo one >"$m/perm"
	exec 8>>"$m/perm"
	chmod 600 "$A/perm" # another program, straight on the storage
	echo two >&8
	exec 8>&-
	# the handle's commit follows its release, which the kernel sends
	# after close(2) without waiting: give it a moment
	sleep 0.5
	[ "$(stat -c %a "$A/perm")" = 600 ] ||
		fail "$KIND: the close put mode $(stat -c %a "$A/perm") back over a chmod"
	[ "$(cat "$A/perm")" = "$(printf 'one\ntwo')" ] || fail "$KIND: perm content"
	rm "$m/perm"
fi

if [ "$KIND" = file ]; then
	# a write changes mtime and ctime together, and nothing after it (no
	# mtime set again at the release, which would move ctime past it:
	# git's index, rsync and backup tools compare both)
	log "$KIND: a write leaves the times it made"
	echo one >"$m/wt"
	sleep 0.3
	echo two >>"$m/wt"
	sleep 0.5
	[ "$(stat -c %.9Y "$A/wt")" = "$(stat -c %.9Z "$A/wt")" ] ||
		fail "$KIND: after an append, mtime $(stat -c %.9Y "$A/wt") ctime $(stat -c %.9Z "$A/wt") on the storage"
	rm "$m/wt"

	# a create's mode, owner and times are the commit's, which follows
	# the release here: they land on the storage while the mount is up,
	# and an unmount right after the close does not lose them
	log "$KIND: a created file's mode and times reach the storage"
	printf 'x\n' >"$T/src"
	chmod 640 "$T/src"
	touch -d 2001-01-01 "$T/src"
	cp -p "$T/src" "$m/made"
	sleep 0.5
	[ "$(stat -c '%a %Y' "$A/made")" = "640 978307200" ] ||
		fail "$KIND: created file on the storage: $(stat -c '%a %Y' "$A/made")"
	# a writer's release commits even while another handle stays open:
	# a chmod after it lands at once, not at that other handle's close
	exec 9>>"$m/made"
	echo more >>"$m/made"
	sleep 0.5
	chmod 600 "$m/made"
	[ "$(stat -c %a "$A/made")" = 600 ] ||
		fail "$KIND: chmod after a writer's close, another handle open: $(stat -c %a "$A/made")"
	exec 9>&-
	for i in 1 2 3; do
		cp -p "$T/src" "$m/quick$i"
		unmount_smux "$m"
		[ "$(stat -c '%a %Y' "$A/quick$i")" = "640 978307200" ] ||
			fail "$KIND: unmounted right after cp -p: $(stat -c '%a %Y' "$A/quick$i")"
		mount_smux "$T/local.conf" "$m"
	done
	rm "$m/made" "$m"/quick*
fi

# An operator's chmod/chown/touch of a file a service holds open for
# writing (a log) is stored when it returns, as on a local disk: other
# clients of the storage see it, and a crash of the daemon before the
# service closes the file does not undo it.
log "$KIND: chmod, chown and touch of a file open for writing reach the storage at once"
# The holder is one process with one descriptor (no dup, no close: a
# shell's `echo >&8` closes a duplicate, a FLUSH that may commit), which
# has written before the changes and writes once more after them.
for how in append rdwr; do
	echo one >"$m/held"
	python3 - "$m/held" "$how" "${replicas[0]}/held" <<'PY' ||
import os, sys
path, how, stored = sys.argv[1:]
flags = os.O_WRONLY | os.O_APPEND if how == "append" else os.O_RDWR
fd = os.open(path, flags)
os.write(fd, b"two\n")
os.chmod(path, 0o600)
os.chown(path, 1234, 2345)
os.utime(path, (978307200, 978307200))
st = os.stat(stored)
got = "%o %d %d %d" % (st.st_mode & 0o7777, st.st_uid, st.st_gid, st.st_mtime)
if got != "600 1234 2345 978307200":
    sys.exit("while open, the storage has " + got)
os.write(fd, b"six\n") # moves the mtime again; mode and owner stay
os.close(fd)
PY
		fail "$KIND ($how): the changes did not reach the storage at once"
	if [ $how = append ]; then
		want=$(printf 'one\ntwo\nsix')
	else
		want=$(printf 'two\nsix')
	fi
	sleep 0.5
	for r in "${replicas[@]}"; do
		[ "$KIND" = failover ] && [ "$r" = "$B" ] && continue
		[ "$(stat -c '%a %u %g' "$r/held")" = "600 1234 2345" ] ||
			fail "$KIND ($how): $r/held after close: $(stat -c '%a %u %g' "$r/held")"
		[ "$(stat -c %Y "$r/held")" -gt 978307200 ] ||
			fail "$KIND ($how): $r/held: a write after touch kept mtime $(stat -c %Y "$r/held")"
		[ "$(cat "$r/held")" = "$want" ] ||
			fail "$KIND ($how): $r/held content: $(cat "$r/held")"
	done
	rm "$m/held"
done

# What a create's close(2) returned with stays: its mode, owner and times
# are stored by then (no commit after it moves ctime: git's index, make).
log "$KIND: a created file's attributes are final when close returns"
python3 - "$m/fin" "$A/fin" <<'PY' ||
import os, sys, time
path, stored = sys.argv[1:]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
os.write(fd, b"x\n")
os.close(fd)
st = os.stat(stored)
a = (st.st_mode, st.st_mtime_ns, st.st_ctime_ns)
time.sleep(0.5)
st = os.stat(stored)
b = (st.st_mode, st.st_mtime_ns, st.st_ctime_ns)
if a != b:
    sys.exit("after close %r, 0.5 s later %r" % (a, b))
PY
	fail "$KIND: a created file's attributes changed after close returned"
rm "$m/fin"

# mtime is the time of the last write, as on a local disk, not of the
# close that followed it (make, rsync and backups compare it): on a mirror
# the commit gives every replica the same one.
log "$KIND: a write's mtime is the write's, not the close's"
written=("$A")
[ "$KIND" = mirror ] && written+=("$B")
python3 - "$m/mt" "${written[@]/%//mt}" <<'PY' ||
import os, sys, time
path, stored = sys.argv[1], sys.argv[2:]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"x" * 100)
os.close(fd)
time.sleep(0.3)
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
t0 = time.time()
os.write(fd, b"more\n")
t1 = time.time()
time.sleep(0.2)
# while it is open too (make, rsync: a stamp written by a running job)
for what, m in (("stat", os.stat(path).st_mtime), ("fstat", os.fstat(fd).st_mtime)):
    if not (t0 - 0.05 <= m <= t1 + 0.3):
        sys.exit("%s of the open file: mtime %.3f, the write was at %.3f-%.3f" % (what, m, t0, t1))
time.sleep(1.3)
os.close(fd)
time.sleep(0.5)
for p in [path] + stored:
    m = os.stat(p).st_mtime
    if not (t0 - 0.05 <= m <= t1 + 0.3):
        sys.exit("%s: mtime %.3f, the write was at %.3f-%.3f" % (p, m, t0, t1))
PY
	fail "$KIND: the mtime after a write and a late close"
rm "$m/mt"

log "$KIND: O_TRUNC of an empty file moves its mtime, as on ext4 (make's stamps: ': > stamp')"
: >"$m/stamp"
touch -d '2020-01-01 00:00:00 UTC' "$m/stamp"
: >"$m/stamp"
for p in "$m/stamp" "$A/stamp"; do
	[ "$(stat -c %Y "$p")" -gt 1600000000 ] || fail "$KIND: ': > stamp' of an empty file left $p's mtime at $(stat -c %y "$p")"
done
rm "$m/stamp"

log "$KIND: df shows the disk's blocks reserved for root as reserved, not used"
read -r dfree davail < <(stat -f -c '%f %a' "$A")
read -r mfree mavail < <(stat -f -c '%f %a' "$m")
dres=$((dfree - davail)) mres=$((mfree - mavail))
# both 4 KiB blocks here; the free counts move with other writers
[ $((mres - dres)) -le 256 ] && [ $((dres - mres)) -le 256 ] ||
	fail "$KIND: blocks free but reserved for root: $mres through the mount, $dres on the disk"

log "$KIND: times beyond 64-bit nanoseconds are clamped, never wrapped; before 1970 kept"
year() { date -u -d "@$(stat -c %Y "$1")" +%Y; }
touch "$m/far"
touch -m -d '2300-01-01 00:00:00 UTC' "$m/far"
for p in "$m/far" "$A/far"; do
	[ "$(year "$p")" -ge 2262 ] || fail "$KIND: mtime 2300 became $(stat -c %y "$p") on $p"
done
# the disk may clamp further (ext4: 1901), as it does for a plain file
touch "$T/far-plain"
touch -m -d '1600-01-01 00:00:00 UTC' "$m/far" "$T/far-plain"
for p in "$m/far" "$A/far"; do
	[ "$(year "$p")" -le 1677 ] || [ "$(stat -c %Y "$p")" = "$(stat -c %Y "$T/far-plain")" ] ||
		fail "$KIND: mtime 1600 became $(stat -c %y "$p") on $p ($(stat -c %y "$T/far-plain") on a plain file)"
done
touch -m -d '1960-06-01 12:00:00 UTC' "$m/far"
for p in "$m/far" "$A/far"; do
	[ "$(stat -c %Y "$p")" = "$(date -u -d '1960-06-01 12:00:00 UTC' +%s)" ] ||
		fail "$KIND: mtime 1960-06-01 became $(stat -c %y "$p") on $p"
done
rm "$m/far"

log "$KIND: a reader keeps its file when an open file is renamed over its name"
echo old >"$m/p"
echo new >"$m/q"
exec 3<"$m/p" 4<>"$m/q"
mv "$m/q" "$m/p"
got=$(cat <&3)
exec 3<&- 4>&-
[ "$got" = old ] || fail "$KIND: the reader of the replaced file read '$got'"
[ "$(cat "$m/p")" = new ] || fail "$KIND: p after the rename: $(cat "$m/p")"
rm "$m/p"

log "$KIND: a handle that only reads commits nothing"
echo v1 >"$m/ro"
exec 8<>"$m/ro"        # opened for writing, never writes
for r in "${replicas[@]}"; do
	[ "$KIND" = failover ] && [ "$r" = "$B" ] && continue
	echo v2 >"$r/ro" # the file changes behind the mount meanwhile
done
exec 8>&-
[ "$(cat "$A/ro")" = v2 ] || fail "$KIND: a reader's close republished old content"

log "$KIND: a sparse file shows the blocks it holds (stat, du), as on the disk"
truncate -s 1G "$m/sparse"
printf x | dd of="$m/sparse" bs=1 seek=$((512 << 20)) conv=notrunc status=none
sync
want=$(stat -c %b "$A/sparse")
got=$(stat -c %b "$m/sparse")
[ "$got" = "$want" ] || fail "$KIND: st_blocks of a sparse 1 GiB file: $got through the mount, $want on the disk"
du=$(du -k "$m/sparse" | cut -f1)
[ "$du" -lt 1024 ] || fail "$KIND: du of a sparse 1 GiB file holding 1 byte: $du KiB"
head -c 100000 /dev/urandom >"$m/dense"
[ "$(stat -c %b "$m/dense")" = "$(stat -c %b "$A/dense")" ] ||
	fail "$KIND: st_blocks of a written file: $(stat -c %b "$m/dense") through the mount, $(stat -c %b "$A/dense") on the disk"
exec 5>"$m/dense" # O_TRUNC: the blocks it held are gone with its bytes
got=$(stat -c '%s %b' "$m/dense")
exec 5>&-
[ "$got" = "0 0" ] || fail "$KIND: size and blocks of a file open with O_TRUNC: $got"
log "$KIND: holes filled in place show their blocks at once, the file open or not"
truncate -s 64M "$m/holes"
exec 6<>"$m/holes" # another descriptor keeps the file open meanwhile
dd if=/dev/urandom of="$m/holes" bs=1M count=4 seek=8 conv=notrunc status=none
got=$(stat -c %b "$m/holes")
want=$(stat -c %b "$A/holes")
exec 6>&-
[ "$got" = "$want" ] || fail "$KIND: st_blocks after 4 MiB written into a hole while open elsewhere: $got through the mount, $want on the disk"
dd if=/dev/urandom of="$m/holes" bs=1M count=4 seek=20 conv=notrunc status=none
got=$(stat -c %b "$m/holes")
want=$(stat -c %b "$A/holes")
[ "$got" = "$want" ] || fail "$KIND: st_blocks after 4 MiB more written into a hole: $got through the mount, $want on the disk"
rm "$m/sparse" "$m/dense" "$m/holes"

unmount_smux "$m"
log "$KIND: ok"
