#!/usr/bin/env bash
# test_stress.sh KIND - Debian's stress-ng file-system stressors on a mount
# of KIND: "file" (one file backend) or "mirror" (two). Each stressor runs
# 1 s with one worker in a directory of the mount and must end without a
# failure; stress-ng checks what it does against what POSIX promises
# (contents, sizes, seeks, links, locks, attributes, permissions).
#
# The stressors are the ones that found defects (seek: ESTALE on a nameless
# file; xattr: a setxattr that did not fit took every replica down; access:
# X_OK allowed without an execute bit) and the ones an everyday program's
# calls look like (files, directories, renames, links, locks, copies).
# After the run every member is still up, and on a mirror both replicas
# hold the same tree.
. "$(dirname "$0")/lib.sh"

KIND=${1:-mirror}
M=$T/mnt
command -v stress-ng >/dev/null || fail "no stress-ng (scripts/install-deps.sh installs it)"

new_config "$T/stress.conf" top
case $KIND in
file)
	cfg_file top "$T/a"
	MEMBERS=""
	;;
mirror)
	cfg_mux top mirror "a b"
	cfg_file a "$T/a"
	cfg_file b "$T/b"
	MEMBERS="a b"
	;;
*) fail "unknown kind $KIND" ;;
esac
mount_smux "$T/stress.conf" "$M"
mkdir "$M/stress"

# fsize is left out: smuxfs has no fallocate(2) (EOPNOTSUPP), so
# stress-ng emulates it with write(2) in a loop that stops, returning 0,
# once the run's time is up - every later check then "unexpectedly
# succeeded" (stress-ng's core-shim.c shim_emulate_fallocate; timing:
# never under strace). The EFBIG defect fsize found is in test_localerr.
STRESSORS="seek xattr access dir dentry rename link symlink open
chmod chown utime lockf fcntl flock readahead sendfile splice copy-file
fstat getdent hdd filename dirdeep"
failed=""
for s in $STRESSORS; do
	rc=0
	out=$(cd "$M/stress" && timeout 60 stress-ng --temp-path "$M/stress" \
		--"$s" 1 -t 1 2>&1) || rc=$?
	if [ "$rc" -ne 0 ] || printf '%s\n' "$out" | grep -q ' fail: '; then
		printf '%s\n' "$out" | grep -E 'fail|error' | head -5 | sed "s/^/  $s: /" >&2
		failed="$failed $s"
	fi
done
[ -z "$failed" ] || fail "stress-ng stressors failed on $KIND:$failed"
log "$(echo $STRESSORS | wc -w) stressors passed"

for b in $MEMBERS; do
	[ "$(backend_stat "$M" "$b" status)" = up ] ||
		fail "member $b is $(backend_stat "$M" "$b" status) after the stressors"
done
unmount_smux "$M"
if [ "$KIND" = mirror ]; then
	diff -r "$T/a" "$T/b" >/dev/null || fail "the replicas differ after the stressors: $(diff -rq "$T/a" "$T/b" | head -3)"
fi
log "passed"
