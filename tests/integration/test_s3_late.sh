#!/usr/bin/env bash
# test_s3_late.sh - a create on an object store of a name another mount of
# the same bucket made after this mount's kernel saw it absent (issue 8
# item 6). The kernel keeps a negative entry for negative_timeout and then
# sends CREATE without looking the name up again; open(2) there must act
# as on the file the name holds now:
#   - O_CREAT|O_APPEND (`echo z >> late`): appended to the other mount's
#     content, not a new object holding only "z";
#   - O_CREAT without O_TRUNC (`dd conv=notrunc`): writes over the start
#     of the content, the rest kept;
#   - O_CREAT|O_EXCL (`set -C; echo > excl`): EEXIST, the object kept;
#   - O_CREAT|O_TRUNC (`echo > trunc`): replaces its content, as on a
#     local disk, and keeps its mode (the other mount made it 0600).
# The server's copy is read with a third, fresh mount.
. "$(dirname "$0")/lib.sh"

use_s3rver

# s3_config FILE [MOUNT OPTION...]: one s3 backend on the bucket
s3_config() {
	local f=$1
	shift
	new_config "$f" s "$@"
	cfg_raw "[backend s]
type = s3
endpoint = $S3_EP
bucket = $S3_BUCKET
credentials_env = S3RV
"
}

# A keeps negative entries long (as s3fs users set them), so its kernel
# still holds every name below absent when the other mount makes it
s3_config "$T/a.conf" negative_timeout=60s
s3_config "$T/b.conf"
A=$T/ma
B=$T/mb
mount_smux "$T/a.conf" "$A"
mount_smux "$T/b.conf" "$B"

mkdir "$B/d"
for n in late notrunc excl trunc; do
	[ ! -e "$A/d/$n" ] || fail "$n exists before the test made it"
done
# a change through A since: the daemon's own note that it just found
# the names absent (absent.c) no longer stands for them
echo other >"$A/other"
for n in late notrunc excl trunc; do
	printf 'orig-%s\n' "$n" >"$B/d/$n"
done
chmod 600 "$B/d/trunc"

echo z >>"$A/d/late" || fail "echo >> late through A"
printf 'ab' | dd of="$A/d/notrunc" conv=notrunc status=none ||
	fail "dd conv=notrunc through A"
if (set -C && echo x >"$A/d/excl") 2>"$T/excl.err"; then
	fail "O_EXCL create of a name the other mount made succeeded"
fi
grep -q "existing file" "$T/excl.err" || fail "O_EXCL: $(cat "$T/excl.err")"
echo new >"$A/d/trunc" || fail "echo > trunc through A"

# what the server holds, through a fresh mount
C=$T/mc
mount_smux "$T/b.conf" "$C"
expect() { [ "$2" = "$3" ] || fail "$1: '$2', want '$3'"; }
expect "late (appended)" "$(cat "$C/d/late")" "$(printf 'orig-late\nz')"
expect "notrunc (written over its start)" "$(cat "$C/d/notrunc")" \
	"ab$(printf 'ig-notrunc')"
expect "excl (kept)" "$(cat "$C/d/excl")" "orig-excl"
expect "trunc (replaced)" "$(cat "$C/d/trunc")" "new"
expect "trunc's mode (kept)" "$(stat -c %a "$C/d/trunc")" 600
log "creates of names made meanwhile act on the file there"

unmount_smux "$C"
unmount_smux "$A"
unmount_smux "$B"
log "ok"
