#!/usr/bin/env bash
# test_deb.sh DEB - the Debian package as an operator meets it (make
# deb-check; issue 11 item 7): lintian reports no error; it installs with
# dpkg on this machine (and is removed again at the end, also on failure);
# smuxfs and smuxctl are in /usr/bin; `man smuxfs.conf` shows every key of
# every section's table in docs/configuration.md; the systemd unit passes
# `systemd-analyze verify`; an fstab line using the installed daemon mounts
# through mount(8) (mount.fuse3 finds smuxfs in PATH), smuxctl status
# reads it, and umount ends it.
set -Eeuo pipefail
export LC_ALL=C
DEB=$(readlink -f "$1")
REPO=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/smux-deb.XXXXXX)
MNT=$T/mnt
installed=0

fail() { echo "test_deb: FAIL: $*" >&2; exit 1; }
cleanup() {
	if grep -qs " $MNT " /proc/mounts; then
		umount "$MNT" 2>/dev/null || fusermount3 -u "$MNT" 2>/dev/null ||
			umount -l "$MNT" || true
	fi
	[ "$installed" = 1 ] && dpkg -r smuxfs >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT

echo "test_deb: lintian $DEB"
lintian "$DEB" >"$T/lintian.out" 2>&1 || true
if grep -q '^E: ' "$T/lintian.out"; then
	cat "$T/lintian.out" >&2
	fail "lintian reports errors (above)"
fi

if dpkg -s smuxfs >/dev/null 2>&1; then
	fail "a smuxfs package is installed already; not touching it"
fi
dpkg -i "$DEB" >"$T/dpkg.out" 2>&1 || { cat "$T/dpkg.out" >&2; fail "dpkg -i"; }
installed=1
[ -x /usr/bin/smuxfs ] && [ -x /usr/bin/smuxctl ] || fail "binaries not installed"
/usr/bin/smuxfs --version | grep -q '^smuxfs ' || fail "smuxfs --version"

# every key in the tables of docs/configuration.md is in the man page
MANWIDTH=200 man smuxfs.conf 2>/dev/null | col -b >"$T/conf.man"
n=0
while read -r key; do
	grep -qF -- "$key" "$T/conf.man" || fail "man smuxfs.conf lacks $key"
	n=$((n + 1))
done < <(sed -n 's/^| `\([a-z_]*\)`.*/\1/p' "$REPO/docs/configuration.md")
[ "$n" -gt 20 ] || fail "only $n keys found in docs/configuration.md"
man -w smuxfs >/dev/null && man -w smuxctl >/dev/null || fail "man pages smuxfs(8), smuxctl(8)"

systemd-analyze verify /lib/systemd/system/smuxfs@.service >"$T/verify.out" 2>&1 ||
	{ cat "$T/verify.out" >&2; fail "systemd-analyze verify"; }
grep -q '^ExecReload=' /lib/systemd/system/smuxfs@.service || fail "no ExecReload"

mkdir -p "$MNT" "$T/a" "$T/b"
cat >"$T/pkg.conf" <<CONF
[mount]
root = m
cache_dir = $T/cache
state_dir = $T/state
[mux m]
mode = mirror
backends = a b
[backend a]
type = file
path = $T/a
[backend b]
type = file
path = $T/b
CONF
echo "$T/pkg.conf $MNT fuse.smuxfs defaults,_netdev 0 0" >"$T/fstab"
PATH=/usr/sbin:/usr/bin:/sbin:/bin timeout 30 mount -T "$T/fstab" "$MNT" ||
	fail "mount of the fstab line"
grep -qs " $MNT fuse.smuxfs " /proc/mounts || fail "not mounted as fuse.smuxfs"
echo packaged >"$MNT/hello"
[ "$(cat "$T/a/hello")" = packaged ] && [ "$(cat "$T/b/hello")" = packaged ] ||
	fail "a write did not reach both replicas"
(cd "$MNT" && smuxctl status) | grep -Eq '^ +a +up ' || fail "smuxctl status"
timeout 30 umount "$MNT" || fail "umount"
echo "test_deb: ok ($n keys in man smuxfs.conf, lintian: $(grep -c '^[EW]: ' "$T/lintian.out" || true) warnings)"
