#!/usr/bin/env bash
# test_rpm.sh RPM - the RPM package (make rpm-check; issue 11 item 7):
# `rpm -qlp` lists the binaries, the three man pages, the systemd unit
# (ExecStart on /usr/bin/smuxfs) and every example config of config/ (but
# demo.conf); the package requires fuse3 and the shared libraries the
# daemon links (libfuse3); the payload unpacks (rpm2cpio | cpio) and the
# unpacked smuxfs and smuxctl run. Installing it is not tried: this
# machine is Debian (dpkg's database; make deb-check installs the .deb).
set -Eeuo pipefail
export LC_ALL=C
RPM=$(readlink -f "$1")
REPO=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/smux-rpm.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "test_rpm: FAIL: $*" >&2; exit 1; }

echo "test_rpm: $RPM"
rpm -qp --qf '%{NAME} %{VERSION}\n' "$RPM" >"$T/nv" 2>/dev/null || fail "rpm -qp cannot read it"
version=$(sed -n 's/^#define SMUXFS_VERSION "\(.*\)"/\1/p' "$REPO/src/fs/main.c")
[ "$(cat "$T/nv")" = "smuxfs $version" ] || fail "name/version: $(cat "$T/nv") (want smuxfs $version)"
rpm -qlp "$RPM" 2>/dev/null >"$T/files"
want=(/usr/bin/smuxfs /usr/bin/smuxctl /usr/lib/systemd/system/smuxfs@.service)
for m in man8/smuxfs.8 man8/smuxctl.8 man5/smuxfs.conf.5; do
	want+=("$(grep -E "^/usr/share/man/$m(\.gz|\.bz2|\.xz|\.zst)?\$" "$T/files" || echo "/usr/share/man/$m")")
done
for c in "$REPO"/config/*.conf; do
	[ "$(basename "$c")" = demo.conf ] && continue
	want+=("/usr/share/doc/smuxfs/examples/$(basename "$c")")
done
for f in "${want[@]}"; do
	grep -qxF -- "$f" "$T/files" || { cat "$T/files" >&2; fail "rpm -qlp lacks $f"; }
done
echo "test_rpm: rpm -qlp lists all ${#want[@]} expected files ($(wc -l <"$T/files") in all)"
rpm -qp --requires "$RPM" 2>/dev/null >"$T/requires"
grep -qx 'fuse3' "$T/requires" || fail "does not require fuse3: $(tr '\n' ' ' <"$T/requires")"
grep -q '^libfuse3\.so\.3' "$T/requires" || fail "does not require libfuse3: $(tr '\n' ' ' <"$T/requires")"
grep -q '^libsqlite3\.so\.0' "$T/requires" || fail "does not require libsqlite3 (the attribute cache): $(tr '\n' ' ' <"$T/requires")"
(cd "$T" && rpm2cpio "$RPM" | cpio -idm --quiet) || fail "the payload does not unpack"
"$T/usr/bin/smuxfs" --version | grep -q "^smuxfs $version" || fail "the packaged smuxfs --version"
"$T/usr/bin/smuxctl" --help >/dev/null || fail "the packaged smuxctl --help"
grep -q '^ExecStart=/usr/bin/smuxfs ' "$T/usr/lib/systemd/system/smuxfs@.service" ||
	fail "the unit does not start /usr/bin/smuxfs"
echo "test_rpm: ok"
