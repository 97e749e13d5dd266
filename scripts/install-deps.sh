#!/bin/sh
# Installs whatever smuxfs needs to build and test that is missing, with
# apt-get. Idempotent: does nothing when everything is there. As a non-root
# user it prints the exact command to run instead.
set -eu

# Debian package -> a file or command that proves it is installed.
PKGS="
gcc:/usr/bin/gcc
make:/usr/bin/make
pkg-config:/usr/bin/pkg-config
libfuse3-dev:/usr/include/fuse3/fuse.h
fuse3:/usr/bin/fusermount3
libcurl4-openssl-dev:/usr/include/x86_64-linux-gnu/curl/curl.h
libinih-dev:/usr/include/ini.h
libcmocka-dev:/usr/include/cmocka.h
libssl-dev:/usr/include/openssl/evp.h
libexpat1-dev:/usr/include/expat.h
libjansson-dev:/usr/include/jansson.h
libsqlite3-dev:/usr/include/sqlite3.h
clang-format:/usr/bin/clang-format
clang-tidy:/usr/bin/clang-tidy
cppcheck:/usr/bin/cppcheck
rsync:/usr/bin/rsync
rclone:/usr/bin/rclone
attr:/usr/bin/setfattr
sqlite3:/usr/bin/sqlite3
git:/usr/bin/git
jq:/usr/bin/jq
python3:/usr/bin/python3
curl:/usr/bin/curl
strace:/usr/bin/strace
stress-ng:/usr/bin/stress-ng
dbench:/usr/bin/dbench
nginx:/usr/sbin/nginx
libnginx-mod-http-dav-ext:/usr/lib/nginx/modules/ngx_http_dav_ext_module.so
apache2-bin:/usr/sbin/apache2
lighttpd:/usr/sbin/lighttpd
lighttpd-mod-webdav:/usr/lib/lighttpd/mod_webdav.so
openssl:/usr/bin/openssl
go-md2man:/usr/bin/go-md2man
lintian:/usr/bin/lintian
dpkg-dev:/usr/bin/dpkg-shlibdeps
man-db:/usr/bin/man
bsdextrautils:/usr/bin/col
systemd:/usr/bin/systemd-analyze
swift:/usr/bin/swift-ring-builder
swift-proxy:/usr/bin/swift-proxy-server
swift-object:/usr/bin/swift-object-server
swift-container:/usr/bin/swift-container-server
swift-account:/usr/bin/swift-account-server
memcached:/usr/bin/memcached
python3-swiftclient:/usr/bin/swift
awscli:/usr/bin/aws
s3fs:/usr/bin/s3fs
python3-botocore:/usr/lib/python3/dist-packages/botocore/__init__.py
nodejs:/usr/bin/node
npm:/usr/bin/npm
prometheus:/usr/bin/promtool
rpm:/usr/bin/rpmbuild
rpm2cpio:/usr/bin/rpm2cpio
cpio:/bin/cpio
"

missing=""
for entry in $PKGS; do
	pkg=${entry%%:*}
	probe=${entry#*:}
	if [ ! -e "$probe" ] && ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $pkg"
	fi
done

[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "smuxfs: missing packages:$missing" >&2
	echo "run: sudo apt-get update && sudo apt-get install -y$missing" >&2
	exit 1
fi

echo "smuxfs: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
