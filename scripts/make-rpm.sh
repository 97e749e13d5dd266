#!/bin/sh
# make-rpm.sh OUTDIR - builds the RPM package of smuxfs with `rpmbuild
# -bb packaging/rpm/smuxfs.spec` (Debian's rpm package) from this
# checkout's normal build (make rpm builds build/smuxfs, build/smuxctl
# and the man pages first). rpmbuild works in OUTDIR/rpmbuild; prints the
# .rpm's path.
set -eu

out=${1:-build/rpm}
tree=$(pwd)
version=$(sed -n 's/^#define SMUXFS_VERSION "\(.*\)"/\1/p' src/fs/main.c)
[ -n "$version" ] || { echo "make-rpm.sh: no SMUXFS_VERSION in src/fs/main.c" >&2; exit 1; }
top=$tree/$out/rpmbuild
rm -rf "$top"
mkdir -p "$top"
# _unitdir: Debian's rpm has no systemd macros; the RPM distributions'
# place for units is /usr/lib/systemd/system
rpmbuild -bb --quiet \
	--define "_topdir $top" \
	--define "smux_version $version" \
	--define "smux_tree $tree" \
	--define "_unitdir /usr/lib/systemd/system" \
	--define "_docdir /usr/share/doc" \
	--define "_mandir /usr/share/man" \
	--define "_bindir /usr/bin" \
	packaging/rpm/smuxfs.spec >"$top/rpmbuild.log" 2>&1 || {
	cat "$top/rpmbuild.log" >&2
	exit 1
}
rpm=$(find "$top/RPMS" -name "smuxfs-$version-*.rpm" | head -n 1)
[ -n "$rpm" ] || { echo "make-rpm.sh: rpmbuild made no package" >&2; exit 1; }
cp "$rpm" "$out/"
echo "$out/$(basename "$rpm")"
