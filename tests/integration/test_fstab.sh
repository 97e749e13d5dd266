#!/usr/bin/env bash
# test_fstab.sh - the operator's entry points: an fstab line mounted with
# `mount -T FSTAB MOUNTPOINT`, `mount -t fuse.smuxfs CONFIG DIR`, `umount`,
# fstab-only options being ignored, allow_other taking effect, a bad config
# failing the mount with a message and no mount left, and --check-config.
#
# Both mounts go through /sbin/mount.fuse3, which runs `smuxfs` through
# /bin/sh. A symlink to $SMUXFS in a temp dir is put first in PATH, but
# util-linux mount(8) (2.38, Debian 12) hands its helpers an environment
# without PATH, so sh falls back to its default path
# (/usr/local/sbin:/usr/local/bin:/usr/sbin:...). So the test runs in a
# private mount namespace (unshare -m) where that temp dir is bind-mounted
# over /usr/local/sbin: the host is never touched, and when the test ends
# the namespace, its mounts and nothing else go away.
if [ -z "${SMUX_IT_IN_NS:-}" ]; then
	SMUX_IT_IN_NS=1 exec unshare --mount --propagation private bash "$0" "$@"
fi
# The new namespace copied every FUSE mount of the machine; a copy keeps
# another test's daemon alive after that test unmounts (make check runs
# two integration lanes at once): let go of them here, where nothing
# propagates back.
findmnt -rn -o FSTYPE,TARGET 2>/dev/null |
	while read -r type m; do
		case $type in
		fuse | fuse.* | fuseblk) umount -l "$(printf '%b' "$m")" 2>/dev/null || true ;;
		esac
	done
. "$(dirname "$0")/lib.sh"

[ -x /sbin/mount.fuse3 ] || fail "/sbin/mount.fuse3 missing (package fuse3)"
mkdir -p "$T/bin"
for f in /usr/local/sbin/*; do
	[ -e "$f" ] && ln -s "$f" "$T/bin/"
done
ln -sf "$SMUXFS" "$T/bin/smuxfs"
mount --bind "$T/bin" /usr/local/sbin
export PATH=$T/bin:$PATH
[ "$(command -v smuxfs)" = "$T/bin/smuxfs" ]
[ "$(env -i /bin/sh -c 'command -v smuxfs')" = /usr/local/sbin/smuxfs ] ||
	fail "smuxfs not found on sh's default path"

new_config "$T/m.conf" m
cfg_mux m mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
echo "from the backend" >"$T/a/pre.txt"
cp "$T/a/pre.txt" "$T/b/pre.txt"

as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

# sys_mount MNT CMD...: runs a mount command; MNT must be ready when it
# returns (the daemon backgrounds itself only once the mount is up).
sys_mount() {
	local mnt=$1
	shift
	mkdir -p "$mnt"
	_SMUX_MOUNTS+=("$mnt")
	env "${SMUX_SAN_ENV[@]}" "$@" || fail "'$*' failed"
	mountpoint -q "$mnt" || fail "'$*' returned before $mnt was mounted"
	grep -q " $mnt fuse.smuxfs " /proc/mounts ||
		fail "$mnt is not fuse.smuxfs in /proc/mounts: $(grep " $mnt " /proc/mounts)"
}

# sys_umount MNT: `umount MNT`; the mount and its daemon must be gone.
sys_umount() {
	local mnt=$1 pids pid
	pids=$(daemon_pids_for "$mnt")
	[ -n "$pids" ] || fail "no smuxfs process serves $mnt"
	umount "$mnt" || fail "umount $mnt failed"
	_smux_forget_mount "$mnt"
	! mountpoint -q "$mnt" || fail "$mnt still mounted after umount"
	! grep -q " $mnt " /proc/mounts || fail "$mnt still in /proc/mounts"
	for pid in $pids; do
		_smux_wait_pid "$pid" 60 || fail "daemon $pid still running after umount"
	done
	check_sanitizers
}

# --- mount -T FSTAB MOUNTPOINT --------------------------------------------------
log "mount -T fstab"
M1=$T/fstab-mnt
mkdir -p "$M1"
printf '# test fstab\n%s %s fuse.smuxfs defaults,_netdev,allow_other 0 0\n' \
	"$T/m.conf" "$M1" >"$T/fstab"
sys_mount "$M1" mount -T "$T/fstab" "$M1"
grep " $M1 " /proc/mounts | grep -q allow_other ||
	fail "allow_other not in the mount options: $(grep " $M1 " /proc/mounts)"
# fstab's "defaults" is "suid,dev" to mount(8): the mount is nosuid and
# nodev all the same (s44-t4: a root fstab mount had neither)
for o in nosuid nodev; do
	grep " $M1 " /proc/mounts | grep -q "[ ,]$o[ ,]" ||
		fail "$o not in the fstab mount's options: $(grep " $M1 " /proc/mounts)"
done
[ "$(cat "$M1/pre.txt")" = "from the backend" ]
echo written >"$M1/new.txt"
[ "$(cat "$T/a/new.txt")" = written ] && [ "$(cat "$T/b/new.txt")" = written ] ||
	fail "a write through the fstab mount did not reach both replicas"
jq -e '.mode == "mirror"' "$M1/.smux/stats" >/dev/null
# allow_other: another user may read (the file is 0644 in a 0755 tree)
as_nobody cat "$M1/pre.txt" >/dev/null || fail "allow_other: nobody cannot read"
sys_umount "$M1"

# --- mount -t fuse.smuxfs CONFIG DIR -------------------------------------------
log "mount -t fuse.smuxfs"
M2=$T/t-mnt
sys_mount "$M2" mount -t fuse.smuxfs "$T/m.conf" "$M2"
[ "$(cat "$M2/new.txt")" = written ]
rm "$M2/new.txt"
[ ! -e "$T/a/new.txt" ] && [ ! -e "$T/b/new.txt" ]
# without allow_other only the mounting user (root) gets in
expect_fail "Permission denied" as_nobody cat "$M2/pre.txt"
sys_umount "$M2"

# --- fstab-only options are ignored ------------------------------------------------
log "fstab-only options"
M3=$T/opts-mnt
sys_mount "$M3" mount -t fuse.smuxfs \
	-o defaults,nofail,_netdev,noatime,x-systemd.automount,x-systemd.requires=network-online.target,x-systemd.device-timeout=10s,comment=smux \
	"$T/m.conf" "$M3"
[ "$(cat "$M3/pre.txt")" = "from the backend" ]
sys_umount "$M3"

# --- a mount that cannot work fails, with a message, and leaves nothing ---------
log "bad config / missing backend directory"
M4=$T/bad-mnt
mkdir -p "$M4"
out=$(mount -t fuse.smuxfs "$T/missing.conf" "$M4" 2>&1) &&
	fail "mount of a missing config succeeded"
[ -n "$out" ] || fail "mount of a missing config failed without a message"
log "missing config: $out"
! mountpoint -q "$M4" || fail "a failed mount left $M4 mounted"
new_config "$T/gone.conf" g
cfg_mux g mirror "a gone"
cfg_file a "$T/a"
cfg_raw "[backend gone]"
cfg_raw "type = file"
cfg_raw "path = $T/does-not-exist"
out=$(mount -t fuse.smuxfs "$T/gone.conf" "$M4" 2>&1) &&
	fail "mount with a missing backend directory succeeded"
grep -q gone <<<"$out" || fail "the error does not name the backend: $out"
log "missing backend dir: $out"
! mountpoint -q "$M4" || fail "a failed mount left $M4 mounted"

# --- --check-config ---------------------------------------------------------------
log "--check-config"
out=$(smuxfs --check-config "$T/m.conf") || fail "--check-config rejected a good config"
grep -q mirror <<<"$out" && grep -q "$T/a" <<<"$out" ||
	fail "--check-config does not describe the tree: $out"
printf '[mount]\nroot = m\n\n[mux m]\nmode = mirror\nbackends = a\n\n[backend a]\ntype = s4\npath = /tmp\n' >"$T/typo.conf"
out=$(smuxfs --check-config "$T/typo.conf" 2>&1) && fail "--check-config accepted type s4"
grep -qE "typo.conf:[0-9]+" <<<"$out" || fail "error does not name file:line: $out"
grep -q s4 <<<"$out" || fail "error does not name the bad value: $out"
log "typo: $out"
