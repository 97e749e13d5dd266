#!/usr/bin/env bash
# test_perms.sh KIND - owners, permissions and the POSIX details of issue 8
# on a mount made by root with allow_other (default_permissions comes
# with it), as root and as a second, unprivileged user (65534):
#   KIND file     one file backend;
#   KIND mirror   a mirror of two file backends: every check on the mount
#                 holds on each replica too;
#   KIND create   files created by the unprivileged user belong to it on
#                 every replica, never with setuid, and open(O_CREAT, 0000)
#                 gives 0000 (the create path of ofile.c; a mirror).
#
# Checked: the kernel's permission checks are on (a 0600 file of root's
# cannot be read, chmodded or deleted by the other user, in a sticky
# directory nor in one it cannot write; a 0644 one cannot be emptied,
# truncated, given times, renamed out of a sticky directory, given an
# extended attribute, and a 0600 one not hard-linked; chown -1 -1 of its
# setuid or setgid file is EPERM and keeps the bits); root's 4777 file
# written by the user loses setuid; directories it makes are its own;
# setuid set by the owner is cleared when it writes, truncates (open
# O_TRUNC, truncate(2)) and by any chown, root's too (a truncate by root
# keeps it); writes do not ask for security.capability each (the kernel
# leaves set-id bits to the daemon); chown and chgrp as
# root show on the mount and on each replica; atime set by touch -a reads
# back; ctime moves on chmod and chown; chmod 000 reads back as 0 on a file,
# a directory and the mount root; a directory's link count is 2 plus its
# subdirectories; a name or path too long is ENAMETOOLONG every time;
# -o no_default_permissions opts out (no kernel checks) with a warning.
. "$(dirname "$0")/lib.sh"

KIND=${1:-mirror}
[ "$(id -u)" = 0 ] || fail "needs root (a mount with allow_other, chown)"
M=$T/mnt
new_config "$T/p.conf" p allow_other=true
case $KIND in
file)
	cfg_file p "$T/a"
	REPLICAS=("$T/a")
	;;
mirror | create)
	cfg_mux p mirror "a b"
	cfg_file a "$T/a"
	cfg_file b "$T/b"
	REPLICAS=("$T/a" "$T/b")
	;;
*) fail "unknown kind $KIND" ;;
esac
mount_smux "$T/p.conf" "$M"
grep " $M " /proc/mounts | grep -q default_permissions ||
	fail "allow_other without default_permissions: $(grep " $M " /proc/mounts)"

U=65534
as_user() { setpriv --reuid=$U --regid=$U --clear-groups "$@"; }

# same_everywhere REL FORMAT WANT: stat -c FORMAT of REL on the mount and
# on every replica is WANT.
same_everywhere() {
	local rel=$1 fmt=$2 want=$3 got r
	got=$(stat -c "$fmt" "$M/$rel")
	[ "$got" = "$want" ] || fail "$rel: '$fmt' is '$got' on the mount, want '$want'"
	for r in "${REPLICAS[@]}"; do
		got=$(stat -c "$fmt" "$r/$rel")
		[ "$got" = "$want" ] || fail "$rel: '$fmt' is '$got' in $r, want '$want'"
	done
}

mkdir -m 1777 "$M/tmp"  # a /tmp: everyone may create, only owners delete
mkdir -m 0755 "$M/root" # a directory the user cannot write
same_everywhere tmp %a 1777

if [ "$KIND" = create ]; then
	log "create: files of the unprivileged user are its own"
	as_user sh -c "echo mine > '$M/tmp/u'" || fail "the user cannot create a file"
	same_everywhere tmp/u %u:%g "$U:$U"
	as_user sh -c "echo more >> '$M/tmp/u'" || fail "the user cannot append to its file"
	as_user touch "$M/tmp/u" || fail "the user cannot touch its file"
	as_user chmod 600 "$M/tmp/u" || fail "the user cannot chmod its file"
	log "create: mode 04755 asked by the user gives no setuid"
	# O_WRONLY|O_CREAT (0101), mode 04755 (umask 022 leaves it)
	as_user perl -e 'sysopen(my $f, $ARGV[0], 0101, 04755) or die "$!"' \
		"$M/tmp/suid" || fail "the user cannot create tmp/suid"
	same_everywhere tmp/suid %a 755
	same_everywhere tmp/suid %u "$U"
	log "create: mknod(2) of a regular file (libfuse makes it a create)"
	as_user /usr/bin/python3 -c 'import os, stat, sys; os.umask(0)
os.mknod(sys.argv[1], stat.S_IFREG | 0o4755)' "$M/tmp/knod" ||
		fail "the user cannot mknod a regular file"
	same_everywhere tmp/knod %u:%g:%a "$U:$U:755"
	log "create: the user's fchmod of its open file whose name is gone keeps set-id bits"
	as_user /usr/bin/python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.unlink(sys.argv[1])
got = []
for m in (0o2755, 0o4755):
    os.fchmod(fd, m)  # its owner, of its group: chmod(2) keeps them
    got.append(os.fstat(fd).st_mode & 0o7777)
if got != [0o2755, 0o4755]:
    sys.exit("fstat after fchmod: %s" % [oct(g) for g in got])' "$M/tmp/orph" ||
		fail "the user's fchmod of its nameless file"
	log "create: open(O_CREAT, 0000) gives 0000"
	perl -e 'sysopen(my $f, $ARGV[0], 0101, 0) or die "$!"' "$M/zero" ||
		fail "open(O_CREAT, 0000) failed"
	same_everywhere zero %a 0
	unmount_smux "$M"
	exit 0
fi

# --- the kernel checks permissions --------------------------------------------------
log "$KIND: another user's 0600 file"
for d in tmp root; do
	echo secret >"$M/$d/s"
	chmod 600 "$M/$d/s"
	expect_fail "Permission denied" as_user cat "$M/$d/s"
	expect_fail "Operation not permitted" as_user chmod 644 "$M/$d/s"
	expect_fail "Operation not permitted" as_user chown $U "$M/$d/s"
	expect_fail "" as_user rm -f "$M/$d/s"
	expect_fail "Permission denied" as_user sh -c "echo x >> '$M/$d/s'"
	same_everywhere "$d/s" %a:%s:%u 600:7:0
done
# chown(f, -1, -1) of another user's setuid (or setgid, group-executable)
# file: EPERM, its bits kept, as on ext4 (the kernel leaves clearing them
# to the daemon, and with it the owner check: posix_diff seeds 26, 38)
log "$KIND: chown -1 -1 of another user's set-id file"
for m in 4755 2775; do
	echo x >"$M/tmp/sid"
	chmod $m "$M/tmp/sid"
	expect_fail "Operation not permitted" as_user /usr/bin/python3 -c \
		'import os, sys; os.chown(sys.argv[1], -1, -1)' "$M/tmp/sid"
	same_everywhere tmp/sid %a $m
	rm -f "$M/tmp/sid"
done
# the user's own setgid file of a group the user is not in (no group
# execute bit): chown -1 -1, a write and a chgrp to the user's own group
# clear setgid, as Linux 6.x does for a caller outside the file's group
# (posix_diff seed 36, FIFOs in; for chgrp the group before the change
# decides: chown_common asks setattr_should_drop_sgid first)
log "$KIND: the user's setgid file of another group: chown -1 -1, a write, chgrp"
for how in chown write chgrp; do
	echo x >"$M/tmp/g$how"
	chown "$U:0" "$M/tmp/g$how"
	chmod 2704 "$M/tmp/g$how"
	as_user /usr/bin/python3 -c 'import os, sys
f, how = sys.argv[1], sys.argv[2]
if how == "chown":
    os.chown(f, -1, -1)
elif how == "chgrp":
    os.chown(f, -1, os.getgid())
else:
    fd = os.open(f, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"y")
    os.close(fd)' "$M/tmp/g$how" $how || fail "$how of tmp/g$how failed"
	same_everywhere "tmp/g$how" %a 704
	rm -f "$M/tmp/g$how"
done
expect_fail "Permission denied" as_user touch "$M/root/new"
expect_fail "Permission denied" as_user mkdir "$M/root/new"
[ ! -e "$T/a/root/new" ] || fail "a refused create left root/new behind"

log "$KIND: another user's 0644 file cannot be emptied, retimed, renamed, linked"
echo public >"$M/tmp/pub"
chmod 644 "$M/tmp/pub"
touch -d '2003-01-01 00:00:00 UTC' "$M/tmp/pub"
expect_fail "Permission denied" as_user sh -c ": > '$M/tmp/pub'"
expect_fail "Permission denied" as_user truncate -s 0 "$M/tmp/pub"
expect_fail "Permission denied" as_user touch -d '2000-01-01' "$M/tmp/pub"
expect_fail "Operation not permitted" as_user mv "$M/tmp/pub" "$M/tmp/moved"
expect_fail "Permission denied" as_user setfattr -n user.x -v 1 "$M/tmp/pub"
expect_fail "Operation not permitted" as_user ln "$M/tmp/s" "$M/tmp/hl"
same_everywhere tmp/pub %a:%s:%u:%Y 644:7:0:1041379200
[ ! -e "$M/tmp/moved" ] || fail "a refused mv left tmp/moved"
[ ! -e "$M/tmp/hl" ] || fail "a refused ln left tmp/hl"
[ "$(cat "$M/tmp/pub")" = public ] || fail "tmp/pub: $(cat "$M/tmp/pub")"

log "$KIND: the user writing root's world-writable setuid file clears setuid"
echo shared >"$M/tmp/rootsuid"
chmod 4777 "$M/tmp/rootsuid"
as_user sh -c "echo by-user >> '$M/tmp/rootsuid'" ||
	fail "the user cannot append to a 0777 file"
for r in "${REPLICAS[@]}"; do
	[ "$(stat -c %a:%u "$r/tmp/rootsuid")" = 777:0 ] ||
		fail "root's setuid survived a write by the user in $r: $(stat -c %a:%u "$r/tmp/rootsuid")"
done
# the same through a descriptor open for reading and writing (a cached
# write: the kernel asks for the clearing with a SETATTR that changes
# nothing, which the owner check of chown -1 -1 refused: EPERM)
echo shared >"$M/tmp/rootsuid2"
chmod 6777 "$M/tmp/rootsuid2"
as_user /usr/bin/python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.pwrite(fd, b"by-user", 100)
os.close(fd)' "$M/tmp/rootsuid2" ||
	fail "the user cannot write a 6777 file open O_RDWR"
same_everywhere tmp/rootsuid2 %a:%u:%s 777:0:107

# --- what the user makes is its own --------------------------------------------------
log "$KIND: directories the user makes are its own"
as_user mkdir "$M/tmp/ud" || fail "the user cannot mkdir in a sticky directory"
same_everywhere tmp/ud %u:%g:%a "$U:$U:755"
as_user mkdir -m 700 "$M/tmp/ud/private"
same_everywhere tmp/ud/private %u:%a "$U:700"
ls "$M/tmp/ud/private" >/dev/null # root still may

# --- setuid ---------------------------------------------------------------------------
log "$KIND: setuid on the user's own file is cleared when it writes"
echo data >"$M/tmp/own"
chown $U:$U "$M/tmp/own"
as_user chmod 4755 "$M/tmp/own" || fail "the owner cannot chmod 4755 (ext4 allows it)"
same_everywhere tmp/own %a 4755
as_user sh -c "echo more >> '$M/tmp/own'"
for r in "${REPLICAS[@]}"; do
	[ "$(stat -c %a "$r/tmp/own")" = 755 ] ||
		fail "setuid survived a write by the user in $r: $(stat -c %a "$r/tmp/own")"
done
sleep 1.2 # the kernel's cached attributes (attr_timeout 1s)
same_everywhere tmp/own %a 755
[ "$(cat "$M/tmp/own")" = "$(printf 'data\nmore')" ] || fail "tmp/own: $(cat "$M/tmp/own")"
chmod 2775 "$M/tmp/own"
as_user dd if=/dev/zero of="$M/tmp/own" bs=1 count=1 conv=notrunc status=none
for r in "${REPLICAS[@]}"; do
	[ "$(stat -c %a "$r/tmp/own")" = 775 ] ||
		fail "setgid on a group-executable file survived a write in $r"
done
chmod 4755 "$M/tmp/own"
echo by-root >>"$M/tmp/own" # a privileged writer keeps it, as on ext4
same_everywhere tmp/own %a 4755
as_user sh -c ": > '$M/tmp/own'" # O_TRUNC by the user, no write()
for r in "${REPLICAS[@]}"; do
	[ "$(stat -c %a "$r/tmp/own")" = 755 ] ||
		fail "setuid survived an O_TRUNC open by the user in $r: $(stat -c %a "$r/tmp/own")"
done
[ ! -s "$M/tmp/own" ] || fail "tmp/own was not truncated"
echo again >"$M/tmp/own"
chmod 4755 "$M/tmp/own"
chmod o+w "$M/tmp/own"
as_user truncate -s 2 "$M/tmp/own" # truncate(2) by the user, by path
for r in "${REPLICAS[@]}"; do
	[ "$(stat -c %a:%s "$r/tmp/own")" = 757:2 ] ||
		fail "setuid survived a truncate(2) by the user in $r: $(stat -c %a:%s "$r/tmp/own")"
done
chmod 4755 "$M/tmp/own"
truncate -s 1 "$M/tmp/own" # by root (CAP_FSETID): kept, as on ext4
same_everywhere tmp/own %a:%s 4755:1
chown 0 "$M/tmp/own" # any chown clears setuid, root's too (as on ext4)
same_everywhere tmp/own %a 755
chmod 2775 "$M/tmp/own"
chgrp 0 "$M/tmp/own"
same_everywhere tmp/own %a 775

# The kernel leaves clearing set-id bits to the daemon (FUSE_HANDLE_KILLPRIV_V2,
# kernels from 5.11): a write then asks for no security.capability, which
# without it costs a round trip to the daemon before every write(2).
if [ "$KIND" = file ] && grep -q 'FUSE_HANDLE_KILLPRIV_V2' "$T"/smuxfs.*.log; then
	:
elif [ "$KIND" = file ]; then
	kv=$(uname -r)
	[ "$(printf '%s\n5.11\n' "${kv%%-*}" | sort -V | head -1)" != 5.11 ] ||
		fail "kernel $kv offers FUSE_HANDLE_KILLPRIV_V2 but the daemon did not take it"
fi
if [ "$KIND" = file ]; then
	x0=$(sed -n 's/^smux_fuse_requests_total{op="getxattr"} //p' "$M/.smux/metrics")
	w0=$(sed -n 's/^smux_fuse_requests_total{op="write"} //p' "$M/.smux/metrics")
	python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(300):
    os.pwrite(fd, b"x" * 100, i * 100)
os.close(fd)' "$M/tmp/many-writes"
	x1=$(sed -n 's/^smux_fuse_requests_total{op="getxattr"} //p' "$M/.smux/metrics")
	w=$(($(sed -n 's/^smux_fuse_requests_total{op="write"} //p' "$M/.smux/metrics") - ${w0:-0}))
	# the writes reached the daemon, or the kernel made them itself
	# (FUSE passthrough, test_passthrough.sh): none did
	if grep -q 'FUSE passthrough' "$T"/smuxfs.*.log; then
		[ "$w" -eq 0 ] || fail "passthrough: $w writes reached the daemon"
	else
		[ "$w" -ge 300 ] || fail "smux_fuse_requests_total counts $w writes"
	fi
	[ $((${x1:-0} - ${x0:-0})) -lt 30 ] ||
		fail "300 writes asked for extended attributes $((${x1:-0} - ${x0:-0})) times"
	log "$KIND: 300 writes: $((${x1:-0} - ${x0:-0})) getxattr requests"
fi

# --- chown as root ----------------------------------------------------------------------
log "$KIND: chown and chgrp as root"
echo f >"$M/f"
c0=$(stat -c %Z "$M/f")
sleep 1.1
chown 1234:1234 "$M/f"
same_everywhere f %u:%g 1234:1234
chgrp 4321 "$M/f"
same_everywhere f %u:%g 1234:4321
chown 77 "$M/tmp/ud"
same_everywhere tmp/ud %u:%g "77:$U"
c1=$(stat -c %Z "$M/f")
[ "$c1" -gt "$c0" ] || fail "ctime did not move on chown ($c0 -> $c1)"
echo rewritten >"$M/f" # a rewrite keeps the owner
same_everywhere f %u:%g 1234:4321
# tar as root: write, fchown, fchgrp, fchmod, close (an open file kept
# dirty: the owner goes with its commit)
python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, b"owned by tar\n")
os.fchown(fd, 2345, -1)
os.fchown(fd, -1, 5432)
os.fchmod(fd, 0o640)
st = os.fstat(fd)
assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (2345, 5432, 0o640), st
os.close(fd)
' "$M/tarred" || fail "fchown of an open file"
same_everywhere tarred %u:%g:%a:%s 2345:5432:640:13

# --- times ----------------------------------------------------------------------------------
log "$KIND: atime set by touch -a reads back, ctime moves on chmod"
m0=$(stat -c %Y "$M/f")
touch -a -d '2001-02-03 04:05:06 UTC' "$M/f"
same_everywhere f %X 981173106
same_everywhere f %Y "$m0"
touch -m -d '2002-02-03 04:05:06 UTC' "$M/f"
same_everywhere f %X:%Y 981173106:1012709106
c0=$(stat -c %Z "$M/f")
sleep 1.1
chmod 640 "$M/f"
c1=$(stat -c %Z "$M/f")
[ "$c1" -gt "$c0" ] || fail "ctime did not move on chmod ($c0 -> $c1)"
[ "$c1" != "$(stat -c %Y "$M/f")" ] || fail "ctime is still the mtime"

# --- mode 0000 -------------------------------------------------------------------------------
log "$KIND: chmod 000 reads back as 0 (file, directory, root)"
chmod 000 "$M/f"
same_everywhere f %a 0
mkdir -m 000 "$M/d0"
same_everywhere d0 %a 0
chmod 000 "$M/tmp/ud"
same_everywhere tmp/ud %a 0
chmod 000 "$M"
[ "$(stat -c %a "$M")" = 0 ] || fail "the root: mode $(stat -c %a "$M") after chmod 000"
chmod 755 "$M"
[ "$(stat -c %a "$M")" = 755 ] || fail "the root: mode $(stat -c %a "$M") after chmod 755"
chmod 644 "$M/f"
[ "$(cat "$M/f")" = rewritten ] || fail "f: content lost over chmod 000"

# --- link counts -----------------------------------------------------------------------------
log "$KIND: a directory's link count is 2 + its subdirectories (the root's too)"
mkdir -p "$M/a/b/c"
touch "$M/a/file"
same_everywhere a %h 3
same_everywhere a/b/c %h 2
mkdir "$M/a/b2"
same_everywhere a %h 4
[ "$(ls -ld "$M/a" | awk '{print $2}')" = 4 ] || fail "ls -ld a: $(ls -ld "$M/a")"
same_everywhere a/file %h 1
# the root too: 2, the directories it lists (.smux among them), as ls -ld
# and find count them
n=$(find "$M" -mindepth 1 -maxdepth 1 -type d | wc -l)
[ "$(stat -c %h "$M")" = $((2 + n)) ] ||
	fail "the root: link count $(stat -c %h "$M"), it lists $n directories"
mkdir "$M/rootsub"
[ "$(stat -c %h "$M")" = $((3 + n)) ] ||
	fail "the root: link count $(stat -c %h "$M") after a mkdir, want $((3 + n))"
rmdir "$M/rootsub"

# --- names too long ----------------------------------------------------------------------
log "$KIND: a name or a path too long is ENAMETOOLONG every time"
long=$(printf 'n%.0s' $(seq 256))
TOOLONG="File name too long"
expect_fail "$TOOLONG" stat "$M/$long"
expect_fail "$TOOLONG" touch "$M/$long"
expect_fail "$TOOLONG" mkdir "$M/$long"
expect_fail "$TOOLONG" stat "$M/$long"
expect_fail "$TOOLONG" ls "$M/tmp/$long"
ok=$(printf 'k%.0s' $(seq 255))
touch "$M/$ok" || fail "a 255-byte name is refused"
same_everywhere "$ok" %s 0
# A file-only tree takes keys up to PATH_MAX - 2 bytes (one byte stays
# for a directory's '/'): 15 directories of 255 bytes are 3840 bytes, a
# name of 254 more is the longest key, 255 is one too many. Relative
# paths from inside, as the kernel limits each system call's path.
seg=$(printf 'd%.0s' $(seq 255))
(
	cd "$M"
	for i in $(seq 15); do
		mkdir "$seg" && cd "$seg" || fail "level $i of the deep tree"
	done
	n254=$(printf 'f%.0s' $(seq 254))
	echo deep >"$n254" || fail "a key of 4094 bytes is refused"
	[ "$(cat "$n254")" = deep ] || fail "the 4094-byte key reads back wrong"
	expect_fail "$TOOLONG" stat "${n254}x"
	expect_fail "$TOOLONG" touch "${n254}x"
	expect_fail "$TOOLONG" mkdir "${n254}x"
	expect_fail "$TOOLONG" stat "${n254}x"
)
deep=$(printf "$seg/%.0s" $(seq 15))
for r in "${REPLICAS[@]}"; do
	(cd "$r/$deep" && [ "$(cat "$(printf 'f%.0s' $(seq 254))")" = deep ]) ||
		fail "the 4094-byte key is missing in $r"
done

unmount_smux "$M"

# --- the explicit opt-out ------------------------------------------------------------
log "$KIND: -o no_default_permissions: no kernel checks, and a warning"
mount_smux "$T/p.conf" "$M" no_default_permissions
grep " $M " /proc/mounts | grep -q allow_other || fail "allow_other lost"
! grep " $M " /proc/mounts | grep -q default_permissions ||
	fail "opted out, still default_permissions: $(grep " $M " /proc/mounts)"
grep -q "allow_other without default_permissions" "$T"/smuxfs.*.log ||
	fail "no warning in the log for the opt-out"
unmount_smux "$M"
