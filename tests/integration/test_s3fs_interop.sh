#!/usr/bin/env bash
# test_s3fs_interop.sh - issue 10: a tree written by s3fs (Debian) lists
# with the same modes, owners, mtimes and types through smuxfs (type = s3
# on the same bucket), and a tree written by smuxfs does through s3fs.
# Both mount the bucket of this run on an s3rver (the shared one of
# `make check`, else one the test starts); every mount is under $T, so
# lib.sh's EXIT trap unmounts it on any failure.
. "$(dirname "$0")/lib.sh"

command -v s3fs >/dev/null || fail "s3fs missing (scripts/install-deps.sh installs s3fs)"
[ "$(id -u)" = 0 ] || fail "needs root (chown to another uid)"

if [ -n "${SMUX_TEST_SERVERS:-}" ] && [ -s "$SMUX_TEST_SERVERS/s3rver/env" ]; then
	S3D=$SMUX_TEST_SERVERS/s3rver
	stop_s3() { :; }
else
	S3D=$T/s3rver
	"$SMUX_REPO/tests/servers/s3rver.sh" start "$S3D" >/dev/null ||
		fail "s3rver did not start"
	stop_s3() { "$SMUX_REPO/tests/servers/s3rver.sh" stop "$S3D" >/dev/null 2>&1 || true; }
fi
EP=$(sed -n 's/^S3_ENDPOINT=//p' "$S3D/env")
export S3T_ACCESS_KEY_ID=S3RVER S3T_SECRET_ACCESS_KEY=S3RVER
printf 'S3RVER:S3RVER\n' >"$T/s3fs.passwd"
chmod 600 "$T/s3fs.passwd"

# mount_s3fs BUCKET MNT: s3fs daemonises once mounted; the wait for the
# mountpoint is bounded. No stat or type cache, so a fresh mount and every
# stat see what the bucket holds.
mount_s3fs() {
	local b=$1 mnt=$2 i
	mkdir -p "$mnt"
	_SMUX_MOUNTS+=("$mnt")
	timeout 30 s3fs "$b" "$mnt" -o url="$EP" -o use_path_request_style \
		-o passwd_file="$T/s3fs.passwd" -o stat_cache_expire=1 \
		-o logfile="$T/s3fs.$b.log" -o dbglevel=warn ||
		fail "s3fs $b $mnt: exit $?"
	for ((i = 0; i < 200; i++)); do
		mountpoint -q "$mnt" && { log "s3fs mounted $mnt"; return 0; }
		sleep 0.1
	done
	fail "s3fs $b: no mount at $mnt after 20 s"
}
unmount_s3fs() {
	_smux_umount "$1" || fail "could not unmount s3fs at $1"
	_smux_forget_mount "$1"
}

# smux_conf BUCKET FILE: a mount of the bucket alone
smux_conf() {
	new_config "$2" s
	cfg_raw "[backend s]
type = s3
endpoint = $EP
bucket = $1
credentials_env = S3T
"
}

# write_tree DIR: the tree both directions write; owners root and
# 1234:2345 (also of a symlink), modes 0600/0755/0640/0750/0000/4755/1777,
# mtimes set with touch -d (one fractional), symlinks, a FIFO, nested and
# empty directories.
write_tree() {
	local d=$1
	mkdir -p "$d/a/b/c" "$d/empty"
	mkdir "$d/locked"
	chmod 000 "$d/locked"
	printf 'secret\n' >"$d/p600"
	printf '#!/bin/sh\n' >"$d/a/x755"
	printf 'group\n' >"$d/a/b/g640"
	printf 'deep\n' >"$d/a/b/c/deep"
	chmod 600 "$d/p600"
	chmod 755 "$d/a/x755"
	chmod 640 "$d/a/b/g640"
	chmod 750 "$d/a/b"
	chown 1234:2345 "$d/a/x755" "$d/a/b/c/deep" "$d/a/b"
	chown 0:2345 "$d/a/b/g640"
	ln -s a/b/g640 "$d/link"
	touch -d '2001-02-03 04:05:06 UTC' "$d/p600"
	touch -d '2011-12-13 14:15:16 UTC' "$d/a/x755"
	touch -d '2021-01-02 03:04:05 UTC' "$d/a/b/g640" "$d/a/b/c/deep"
	touch -d '2019-09-09 09:09:09 UTC' "$d/a/b/c"
	touch -h -d '2018-08-08 08:08:08 UTC' "$d/link"
	ln -s p600 "$d/a/link2"
	chown -h 1234:2345 "$d/a/link2"
	touch -h -d '2017-07-07 07:07:07 UTC' "$d/a/link2"
	printf 'frac\n' >"$d/frac"
	printf 'suid\n' >"$d/suid"
	chmod 4755 "$d/suid"
	chmod 1777 "$d/empty"
	mkfifo "$d/fifo"
	chmod 620 "$d/fifo"
	touch -d '2016-06-06 06:06:06 UTC' "$d/fifo" "$d/suid"
	touch -d '2022-02-02 02:02:02.5 UTC' "$d/frac"
}

# view DIR: one line per entry: path, mode, uid, gid, type; mtime and size
# for files and symlinks; a directory's mtime only for a/b/c, the one the
# tree sets last (the others move as entries are made in them).
view() {
	(cd "$1" && find . -mindepth 1 | sort | while read -r p; do
		if [ "$p" = ./a/b/c ]; then
			stat -c "%n %a %u %g %Y %F" "$p"
		elif [ -d "$p" ]; then
			stat -c "%n %a %u %g %F" "$p"
		elif [ -L "$p" ]; then
			echo "$(stat -c '%n %u %g %Y %F' "$p") -> $(readlink "$p")"
		else
			stat -c "%n %a %u %g %Y %s %F" "$p"
		fi
	done)
}

# ls_view DIR: ls -lRn's mode, owner, group, size, mtime and name columns
# (link counts differ; a directory's size and mtime are the filesystem's)
# shellcheck disable=SC2012 # ls -l's columns are what is compared
ls_view() {
	(cd "$1" && ls -lRn --time-style=+%s . |
		awk 'NF >= 7 { $2 = ""; if ($1 ~ /^d/) { $5 = ""; $6 = "" }; print }')
}

# check_same WHAT A B: the views of two trees are the same
check_same() {
	view "$2" >"$T/va"
	view "$3" >"$T/vb"
	diff -u "$T/va" "$T/vb" >"$T/vd" || fail "$1: stat differs:
$(cat "$T/vd")"
	ls_view "$2" >"$T/la"
	ls_view "$3" >"$T/lb"
	diff -u "$T/la" "$T/lb" >"$T/ld" || fail "$1: ls -l differs:
$(cat "$T/ld")"
}

awsc() {
	AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER \
		AWS_DEFAULT_REGION=us-east-1 aws --endpoint-url "$EP" "$@"
}

SRC=$T/src
write_tree "$SRC"

# (1) s3fs writes, smuxfs reads
B1=smux-s3fs-$$-$RANDOM
awsc s3api create-bucket --bucket "$B1" >/dev/null
mount_s3fs "$B1" "$T/s3fs1"
write_tree "$T/s3fs1/t"
check_same "s3fs's view of what it wrote" "$SRC" "$T/s3fs1/t"
smux_conf "$B1" "$T/m1.conf"
mount_smux "$T/m1.conf" "$T/m1"
check_same "smuxfs's view of what s3fs wrote" "$T/s3fs1/t" "$T/m1/t"
unmount_smux "$T/m1"
unmount_s3fs "$T/s3fs1"
log "a tree s3fs wrote lists the same through smuxfs"

# (2) smuxfs writes, s3fs reads
B2=smux-s3fs-$$-$RANDOM
awsc s3api create-bucket --bucket "$B2" >/dev/null
smux_conf "$B2" "$T/m2.conf"
mount_smux "$T/m2.conf" "$T/m2"
write_tree "$T/m2/t"
check_same "smuxfs's view of what it wrote" "$SRC" "$T/m2/t"
unmount_smux "$T/m2"
mount_s3fs "$B2" "$T/s3fs2"
check_same "s3fs's view of what smuxfs wrote" "$SRC" "$T/s3fs2/t"
unmount_s3fs "$T/s3fs2"
log "a tree smuxfs wrote lists the same through s3fs"

# (3) objects without owner metadata (the aws CLI's): chown of the uid
# alone and chgrp of the gid alone are kept (they were dropped silently:
# the backend stored an owner only when it knew both ids)
printf 'u\n' >"$T/plain"
for k in t/plain-u t/plain-g; do
	awsc s3 cp "$T/plain" "s3://$B2/$k" --quiet
done
mount_smux "$T/m2.conf" "$T/m2"
chown 1234 "$T/m2/t/plain-u"
chgrp 2345 "$T/m2/t/plain-g"
unmount_smux "$T/m2"
mount_smux "$T/m2.conf" "$T/m2"
u=$(stat -c '%u %g' "$T/m2/t/plain-u")
g=$(stat -c '%u %g' "$T/m2/t/plain-g")
[ "$u" = "1234 $(id -g)" ] || fail "chown 1234 of an object without owner: $u"
[ "$g" = "$(id -u) 2345" ] || fail "chgrp 2345 of an object without owner: $g"
unmount_smux "$T/m2"
mount_s3fs "$B2" "$T/s3fs2"
[ "$(stat -c %u "$T/s3fs2/t/plain-u")" = 1234 ] || fail "s3fs: uid of plain-u"
[ "$(stat -c %g "$T/s3fs2/t/plain-g")" = 2345 ] || fail "s3fs: gid of plain-g"
unmount_s3fs "$T/s3fs2"
log "chown or chgrp alone of an object without owner metadata is kept"
stop_s3
