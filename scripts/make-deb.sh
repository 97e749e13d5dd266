#!/bin/sh
# make-deb.sh OUTDIR - builds the Debian package of smuxfs from this
# checkout's normal build (make deb runs it after building build/smuxfs,
# build/smuxctl and the man pages in build/man). Prints the .deb's path.
#
# The package: /usr/bin/smuxfs and smuxctl (stripped), the man pages, the
# systemd template unit (paths rewritten to /usr/bin), the example configs
# in /usr/share/doc/smuxfs/examples, the copyright (machine-readable) and a
# changelog. Depends are the shared libraries the binaries link, found by
# dpkg-shlibdeps, plus fuse3 (fusermount3, mount.fuse3).
set -eu

out=${1:-build/deb}
version=$(sed -n 's/^#define SMUXFS_VERSION "\(.*\)"/\1/p' src/fs/main.c)
arch=$(dpkg --print-architecture)
pkg=smuxfs_${version}_${arch}
root=$out/$pkg
rm -rf "$root"
mkdir -p "$root/DEBIAN" "$root/usr/bin" "$root/usr/share/man/man8" \
	"$root/usr/share/man/man5" "$root/usr/share/doc/smuxfs/examples" \
	"$root/lib/systemd/system"

install -m 0755 -s build/smuxfs build/smuxctl "$root/usr/bin/"
for m in smuxfs.8 smuxctl.8; do
	gzip -9n <"build/man/$m" >"$root/usr/share/man/man8/$m.gz"
done
gzip -9n <build/man/smuxfs.conf.5 >"$root/usr/share/man/man5/smuxfs.conf.5.gz"
sed 's#/usr/local/bin/smuxfs#/usr/bin/smuxfs#' packaging/systemd/smuxfs@.service \
	>"$root/lib/systemd/system/smuxfs@.service"
chmod 0644 "$root/lib/systemd/system/smuxfs@.service"
for c in config/*.conf; do
	[ "$(basename "$c")" = demo.conf ] && continue
	install -m 0644 "$c" "$root/usr/share/doc/smuxfs/examples/"
done
install -m 0644 packaging/debian/copyright "$root/usr/share/doc/smuxfs/copyright"
gzip -9n <packaging/debian/changelog >"$root/usr/share/doc/smuxfs/changelog.gz"

# the libraries the binaries need, as dpkg-shlibdeps finds them
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/debian"
printf 'Source: smuxfs\n\nPackage: smuxfs\nArchitecture: any\n' >"$tmp/debian/control"
(cd "$tmp" && dpkg-shlibdeps -O "$OLDPWD/$root/usr/bin/smuxfs" \
	"$OLDPWD/$root/usr/bin/smuxctl" 2>/dev/null) >"$tmp/deps"
shlibs=$(sed -n 's/^shlibs:Depends=//p' "$tmp/deps")
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" \
	-e "s/@DEPENDS@/${shlibs:+$shlibs, }fuse3/" -e "s/@SIZE@/$size/" \
	packaging/debian/control.in >"$root/DEBIAN/control"
(cd "$root" && find usr lib -type f -exec md5sum {} + | sort -k2) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"
find "$root" -type d -exec chmod 0755 {} +
dpkg-deb --root-owner-group -Zxz --build "$root" "$out/$pkg.deb" >/dev/null
echo "$out/$pkg.deb"
