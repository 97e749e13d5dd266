#!/usr/bin/env bash
# test_ro_perms.sh - mount options of the permission model:
#   -o ro                 every change fails with EROFS, reads work, the
#                         backends are untouched;
#   -o uid=,gid=,umask=   shown by ls -ln on files and directories (old and
#                         new), umask bits cleared from every mode;
#                         access(2) as root: X_OK needs an execute bit;
#   -o allow_other,default_permissions with those: the kernel enforces the
#                         shown owner and mode against other users.
. "$(dirname "$0")/lib.sh"

M=$T/mnt
new_config "$T/m.conf" m
cfg_mux m mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
for d in "$T/a" "$T/b"; do
	mkdir -p "$d/dir"
	echo "content" >"$d/file.txt"
	echo "inner" >"$d/dir/inner.txt"
	chmod 0666 "$d/file.txt" "$d/dir/inner.txt"
	chmod 0777 "$d/dir"
done
( cd "$T" && find a b -exec stat -c '%n %s %a %Y' {} + | sort ) >"$T/before"

# --- ro -----------------------------------------------------------------------------
log "-o ro"
mount_smux "$T/m.conf" "$M" ro
grep " $M " /proc/mounts | awk '{print $4}' | tr ',' '\n' | grep -qx ro ||
	fail "the mount is not ro in /proc/mounts: $(grep " $M " /proc/mounts)"
[ "$(cat "$M/file.txt")" = content ]
[ "$(cat "$M/dir/inner.txt")" = inner ]
ls -lR "$M" >/dev/null
EROFS="Read-only file system"
expect_fail "$EROFS" touch "$M/new.txt"
expect_fail "$EROFS" touch "$M/file.txt"
expect_fail "$EROFS" mkdir "$M/newdir"
expect_fail "$EROFS" rm "$M/file.txt"
expect_fail "$EROFS" rmdir "$M/dir"
expect_fail "$EROFS" rm -r "$M/dir"
expect_fail "$EROFS" mv "$M/file.txt" "$M/moved.txt"
expect_fail "$EROFS" sh -c "echo more >> '$M/file.txt'"
expect_fail "$EROFS" sh -c "echo new > '$M/file.txt'"
expect_fail "$EROFS" truncate -s 0 "$M/file.txt"
expect_fail "$EROFS" chmod 600 "$M/file.txt"
expect_fail "$EROFS" ln -s file.txt "$M/link"
expect_fail "$EROFS" cp "$M/file.txt" "$M/dir/copy.txt"
expect_fail "$EROFS" dd if=/dev/zero of="$M/dd.bin" bs=4k count=1 status=none
[ "$(cat "$M/file.txt")" = content ]
unmount_smux "$M"
( cd "$T" && find a b -exec stat -c '%n %s %a %Y' {} + | sort ) >"$T/after"
diff "$T/before" "$T/after" || fail "a read-only mount changed the backends"

# --- uid=, gid=, umask= -----------------------------------------------------------
log "-o uid=1234,gid=2345,umask=027"
mount_smux "$T/m.conf" "$M" uid=1234,gid=2345,umask=027
echo fresh >"$M/fresh.txt"
mkdir "$M/freshdir"
for p in file.txt dir dir/inner.txt fresh.txt freshdir; do
	read -r mode uid gid < <(stat -c '%a %u %g' "$M/$p")
	log "$p: mode $mode uid $uid gid $gid"
	[ "$uid" = 1234 ] || fail "$p: uid $uid, want 1234"
	[ "$gid" = 2345 ] || fail "$p: gid $gid, want 2345"
	[ $((8#$mode & 8#027)) -eq 0 ] || fail "$p: mode $mode has bits of umask 027"
	[ $((8#$mode & 8#600)) -eq $((8#600)) ] || fail "$p: mode $mode lacks owner rw"
done
for p in dir freshdir; do
	[ "$(stat -c %a "$M/$p")" = 750 ] || fail "$p: mode $(stat -c %a "$M/$p"), want 750"
done
ls -ln "$M" | awk '$NF == "file.txt" { exit !($3 == 1234 && $4 == 2345) }' ||
	fail "ls -ln does not show 1234 2345: $(ls -ln "$M")"
# access(2) answers as on a local filesystem: without default_permissions
# the kernel asks the daemon, and root gets X_OK only with an execute bit
# (the daemon did not answer ACCESS, which the kernel takes as "allowed":
# X_OK of a 0640 file said yes; stress-ng's access stressor)
may() { python3 -c 'import os, sys; print(int(os.access(sys.argv[1], int(sys.argv[2]))))' "$@"; }
[ "$(may "$M/file.txt" 1)" = 0 ] || fail "access(X_OK) of a mode 640 file said yes to root"
[ "$(may "$M/file.txt" 6)" = 1 ] || fail "access(R_OK|W_OK) of file.txt said no to root"
[ "$(may "$M/dir" 7)" = 1 ] || fail "access(R_OK|W_OK|X_OK) of a directory said no to root"
chmod 0750 "$M/fresh.txt"
[ "$(may "$M/fresh.txt" 1)" = 1 ] || fail "access(X_OK) of a mode 750 file said no to root"
[ "$(may "$M/absent" 0)" = 0 ] || fail "access(F_OK) of a missing name said yes"
unmount_smux "$M"

# --- enforced with allow_other,default_permissions -----------------------------------
log "-o allow_other,default_permissions,uid=,gid=,umask=077"
U=$(id -u nobody)
G=$(id -g nobody)
mount_smux "$T/m.conf" "$M" allow_other,default_permissions,uid=$U,gid=$G,umask=077
as() { setpriv --reuid="$1" --regid="$2" --clear-groups "${@:3}"; }
[ "$(as "$U" "$G" cat "$M/file.txt")" = content ] || fail "the owner cannot read"
as "$U" "$G" sh -c "echo by-owner > '$M/owned.txt'" || fail "the owner cannot create"
expect_fail "Permission denied" as 4321 4321 cat "$M/file.txt"
expect_fail "Permission denied" as 4321 4321 ls "$M/dir"
expect_fail "Permission denied" as 4321 4321 touch "$M/dir/x"
unmount_smux "$M"
[ "$(cat "$T/a/owned.txt")" = by-owner ] && [ "$(cat "$T/b/owned.txt")" = by-owner ] ||
	fail "owned.txt did not reach both replicas"
