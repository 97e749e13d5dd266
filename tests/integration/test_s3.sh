#!/usr/bin/env bash
# test_s3.sh - a mirror mount of a file backend and an s3 backend on an
# s3rver the test starts on loopback: cp -r, tar x, a multipart-sized file,
# rename and rm -r through the mount; the objects read back with the aws
# CLI byte for byte; objects the aws CLI wrote (awkward keys, nested
# prefixes, a multipart object) list and read through a fresh mount; the
# secret key appears in no log, error or .smux file.
. "$(dirname "$0")/lib.sh"

command -v aws >/dev/null || fail "aws CLI missing (scripts/install-deps.sh installs awscli)"

# s3rver: the one `make check` started for every pass
# (tests/servers/shared.sh), else one of its own with its data under $T
# (the harness's cleanup stops what names $T). A bucket of this run's own.
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
B=smux-it-$$-$RANDOM
log "s3rver at $EP, bucket $B"

# s3rver checks the access key, not the signature: the secret is a canary
# that must never show up anywhere
CANARY=smux-canary-secret-4f9a1c
export S3T_ACCESS_KEY_ID=S3RVER S3T_SECRET_ACCESS_KEY=$CANARY
awsc() {
	AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER \
		AWS_DEFAULT_REGION=us-east-1 aws --endpoint-url "$EP" "$@"
}
awsc s3api create-bucket --bucket "$B" >/dev/null

CONF=$T/s3.conf
new_config "$CONF" m
cfg_mux m mirror "f s"
cfg_file f "$T/f"
cfg_raw "[backend s]
type = s3
endpoint = $EP
bucket = $B
prefix = tree
credentials_env = S3T
"
M=$T/mnt
mount_smux "$CONF" "$M"

S=$T/src
make_tree "$S" 3 5
cp -r "$S" "$M/copy"
(cd "$S" && tar cf "$T/t.tar" .)
mkdir "$M/untar"
tar xf "$T/t.tar" -C "$M/untar"
diff -r "$S" "$M/copy"
diff -r "$S" "$M/untar"
log "cp -r and tar x through the mount match the source"

# 20 MiB: a multipart upload (8 MiB parts) at close
head -c $((20 * 1024 * 1024)) /dev/urandom >"$T/big"
cp "$T/big" "$M/big"
cmp "$T/big" "$M/big"
mv "$M/copy/d1/f3.dat" "$M/copy/d1/moved.dat"
cmp "$S/d1/f3.dat" "$M/copy/d1/moved.dat"
[ ! -e "$M/copy/d1/f3.dat" ] || fail "renamed file still there"
rm -r "$M/untar"
[ ! -e "$M/untar" ] || fail "rm -r left untar"
# a symlink and odd modes, for ls -l through a fresh mount below
mkdir "$M/meta"
ln -s ../big "$M/meta/link"
printf 'private\n' >"$M/meta/private"
chmod 600 "$M/meta/private"

# what the mount wrote, read with the aws CLI
awsc s3 cp "s3://$B/tree/big" "$T/big.aws" --quiet
cmp "$T/big" "$T/big.aws"
awsc s3 cp "s3://$B/tree/copy/d1/moved.dat" "$T/moved.aws" --quiet
cmp "$S/d1/f3.dat" "$T/moved.aws"
n=$( (awsc s3 ls "s3://$B/tree/untar/" --recursive || true) | wc -l)
[ "$n" = 0 ] || fail "rm -r left $n objects under tree/untar/"
log "the aws CLI reads what the mount wrote, byte for byte"

# what the aws CLI writes, through the mount: awkward keys, nested
# prefixes, a multipart object (5 MiB parts)
printf 'plus\n' >"$T/k1"
printf 'unicode\n' >"$T/k2"
awsc s3 cp "$T/k1" "s3://$B/tree/aws/a b+c.txt" --quiet
U=$(printf '\xc3\xa9t\xc3\xa9.txt')
awsc s3 cp "$T/k2" "s3://$B/tree/aws/deep/er/$U" --quiet
head -c $((12 * 1024 * 1024)) /dev/urandom >"$T/mp"
printf '[default]\ns3 =\n    multipart_threshold = 5MB\n    multipart_chunksize = 5MB\n' >"$T/aws.cfg"
AWS_CONFIG_FILE=$T/aws.cfg awsc s3 cp "$T/mp" "s3://$B/tree/aws/mp.bin" --quiet
unmount_smux "$M"

# the aws objects exist only on s3: a failover mount reading s3 alone
CONF2=$T/s3only.conf
new_config "$CONF2" s
cfg_raw "[backend s]
type = s3
endpoint = $EP
bucket = $B
prefix = tree
credentials_env = S3T
"
mount_smux "$CONF2" "$M"
ls -lR "$M/aws" >"$T/lsr"
grep -q 'a b+c.txt' "$T/lsr" || fail "a b+c.txt not listed: $(cat "$T/lsr")"
cmp "$T/k1" "$M/aws/a b+c.txt"
cmp "$T/k2" "$M/aws/deep/er/$U"
cmp "$T/mp" "$M/aws/mp.bin"
[ "$(stat -c %s "$M/aws/mp.bin")" = $((12 * 1024 * 1024)) ] ||
	fail "mp.bin has the wrong size"
cmp "$T/big" "$M/big"
log "objects written by the aws CLI list and read through the mount"

# a rename on s3 is a CopyObject whose x-amz-copy-source is percent-encoded:
# names with reserved characters (dbench's "@@@CDRW.TMP" failed with ENOENT
# on s3rver, which decoded that header with decodeURI)
mkdir "$M/odd"
for n in '@@@x.TMP' 'a:b;c' 'p+q=r&s' 'd$e,f' 'h#i?j' "sp ace'q"; do
	printf '%s\n' "$n" >"$M/odd/$n"
	mv "$M/odd/$n" "$M/odd/$n.moved" || fail "rename of '$n' failed"
	[ "$(cat "$M/odd/$n.moved")" = "$n" ] || fail "'$n' renamed wrong"
	awsc s3 cp "s3://$B/tree/odd/$n.moved" "$T/odd.aws" --quiet ||
		fail "'$n.moved' is not on the server"
	[ "$(cat "$T/odd.aws")" = "$n" ] || fail "'$n.moved' on the server"
done
rm -r "$M/odd"
log "renames of names with reserved characters"

# ls -l of a directory on a fresh mount shows what was stored: the type
# and mode of each entry (S3 listings carry neither: a listed symlink
# taken for a regular file turned into EIO when its lookup said symlink)
ls -l "$M/meta" >"$T/lsmeta" 2>&1 || fail "ls -l meta: $(cat "$T/lsmeta")"
grep -q '^lrwxrwxrwx .* link -> ../big$' "$T/lsmeta" ||
	fail "ls -l does not show the symlink: $(cat "$T/lsmeta")"
grep -q '^-rw------- .* private$' "$T/lsmeta" ||
	fail "ls -l does not show mode 0600: $(cat "$T/lsmeta")"
[ "$(readlink "$M/meta/link")" = ../big ] || fail "readlink meta/link"
log "ls -l on a fresh mount shows the symlink and the 0600 mode"

# the secret never shows: not in .smux, not in the daemon's log
for f in "$M"/.smux/*; do
	[ -f "$f" ] || continue
	! grep -qF "$CANARY" "$f" 2>/dev/null || fail "secret in $f"
done
unmount_smux "$M"
! grep -rqF "$CANARY" "$T"/*.log 2>/dev/null || fail "secret in a log"
stop_s3
