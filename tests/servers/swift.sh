#!/bin/sh
# tests/servers/swift.sh start|stop DIR - OpenStack Swift (Debian) with the
# S3 API (s3api + tempauth) on 127.0.0.1, for tests.
#
# start: builds single-replica account/container/object rings in DIR/etc,
# stores objects under DIR/node (DIR must be on a filesystem with user
# xattrs: ext4, xfs; tmpfs only on kernel >= 6.6), starts memcached and the
# four Swift servers on free loopback ports (pids in DIR/pids, logs in
# DIR/log/), waits (bounded) until an S3 request signed with SigV4 is
# answered, then prints the endpoint and credentials and writes them to
# DIR/env as shell assignments:
#   S3_ENDPOINT=http://127.0.0.1:PORT S3_REGION=us-east-1
#   S3_ACCESS_KEY=test:tester S3_SECRET_KEY=testing
#   SWIFT_AUTH_URL=http://127.0.0.1:PORT/auth/v1.0
#   S3_VHOST_DOMAIN=s3.localhost (BUCKET.s3.localhost:PORT is virtual-host
#   addressing; the client resolves it to 127.0.0.1 itself)
#   SWIFT_RACK_USER=rack:rackuser SWIFT_RACK_KEY=rackkey (a second tempauth
#   account, MossoCloudFS_rack, named as Rackspace Cloud Files names them)
#   SWIFT_READER_USER=test:reader SWIFT_READER_KEY=reader (a user of
#   AUTH_test without .admin: only what a container's ACL grants it)
# The S3 API checks SigV4 and payload hashes strictly; tempauth's user
# test:tester (password testing) is the S3 access key and secret.
# stop: kills what start started (also callable from a trap; idempotent).
# Exit status: 0 ok, 1 failure (logs are printed), 2 usage.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

[ $# -eq 2 ] || {
	echo "usage: $0 start|stop DIR" >&2
	exit 2
}
cmd=$1
dir=$2

for b in swift-proxy-server swift-account-server \
	swift-container-server swift-object-server memcached; do
	if ! command -v "$b" >/dev/null 2>&1; then
		echo "swift.sh: $b missing (scripts/install-deps.sh installs it)" >&2
		exit 1
	fi
done

case $cmd in
stop)
	srv_stop_all "$dir"
	exit 0
	;;
start) ;;
*)
	echo "usage: $0 start|stop DIR" >&2
	exit 2
	;;
esac

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -s "$dir/pids" ]; then
	echo "swift.sh: $dir is in use (run stop first)" >&2
	exit 1
fi
srv_starting "$dir"
trap 'rc=$?; if [ $rc -ne 0 ]; then srv_dump_logs "$dir"; srv_stop_all "$dir"; fi' EXIT

# The object server keeps metadata in user xattrs: check before starting.
mkdir -p "$dir/node/d1" "$dir/etc" "$dir/run"
probe="$dir/node/d1/.xattr-probe"
: >"$probe"
if ! /usr/bin/python3 -c 'import os,sys; os.setxattr(sys.argv[1], "user.smux", b"1")' "$probe" 2>/dev/null; then
	echo "swift.sh: $dir has no user xattrs; use a directory on ext4/xfs" >&2
	exit 1
fi
rm -f "$probe"

set -- $(srv_free_ports 5)
mc_port=$1 proxy_port=$2 acct_port=$3 cont_port=$4 obj_port=$5
user=$(id -un)

# Rings: partition power 6, one replica, one device each; built in one
# Python process (swift-ring-builder would start nine).
/usr/bin/python3 - "$dir/etc" "$acct_port" "$cont_port" "$obj_port" <<'PY'
import sys
from swift.common.ring import RingBuilder
etc = sys.argv[1]
for name, port in zip(("account", "container", "object"), sys.argv[2:5]):
    b = RingBuilder(6, 1, 1)
    b.add_dev({"id": 0, "region": 1, "zone": 1, "ip": "127.0.0.1",
               "port": int(port), "device": "d1", "weight": 100})
    b.rebalance()
    b.get_ring().save(f"{etc}/{name}.ring.gz")
PY

common()
{
	cat <<CONF
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = $1
workers = 0
user = $user
swift_dir = $dir/etc
devices = $dir/node
mount_check = false
disable_fallocate = true
log_name = $2
log_level = INFO
CONF
}

{
	common "$acct_port" account
	printf '[pipeline:main]\npipeline = account-server\n'
	printf '[app:account-server]\nuse = egg:swift#account\n'
	printf '[account-replicator]\n[account-auditor]\n[account-reaper]\n'
} >"$dir/etc/account-server.conf"
{
	common "$cont_port" container
	printf '[pipeline:main]\npipeline = container-server\n'
	printf '[app:container-server]\nuse = egg:swift#container\n'
	printf '[container-replicator]\n[container-updater]\n'
	printf '[container-auditor]\n[container-sync]\n'
} >"$dir/etc/container-server.conf"
{
	common "$obj_port" object
	printf '[pipeline:main]\npipeline = object-server\n'
	printf '[app:object-server]\nuse = egg:swift#object\n'
	printf '[object-replicator]\n[object-updater]\n[object-auditor]\n'
} >"$dir/etc/object-server.conf"
{
	common "$proxy_port" proxy
	cat <<CONF
[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats bulk tempurl s3api tempauth copy slo dlo proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:tempauth]
use = egg:swift#tempauth
# AUTH_ as before (the S3 API's test:tester); MossoCloudFS_ is Rackspace
# Cloud Files' account prefix, for the swift backend's second account
reseller_prefix = AUTH, MossoCloudFS
user_test_tester = testing .admin
user_rack_rackuser = rackkey .admin http://127.0.0.1:$proxy_port/v1/MossoCloudFS_rack
# no .admin: only what a container ACL grants (a refused delete)
user_test_reader = reader
storage_url_scheme = http

[filter:s3api]
use = egg:swift#s3api
location = us-east-1
# virtual-host addressing for BUCKET.s3.localhost (resolve it to 127.0.0.1)
storage_domain = s3.localhost

[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:$mc_port

[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:healthcheck]
use = egg:swift#healthcheck
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:listing_formats]
use = egg:swift#listing_formats
[filter:bulk]
use = egg:swift#bulk
[filter:tempurl]
use = egg:swift#tempurl
[filter:copy]
use = egg:swift#copy
[filter:slo]
use = egg:swift#slo
[filter:dlo]
use = egg:swift#dlo
CONF
} >"$dir/etc/proxy-server.conf"

mc_user=""
[ "$(id -u)" -eq 0 ] && mc_user="-u root"
# shellcheck disable=SC2086
srv_spawn "$dir" memcached memcached -l 127.0.0.1 -p "$mc_port" -U 0 -m 64 $mc_user
srv_spawn "$dir" account swift-account-server "$dir/etc/account-server.conf" -v
srv_spawn "$dir" container swift-container-server "$dir/etc/container-server.conf" -v
srv_spawn "$dir" object swift-object-server "$dir/etc/object-server.conf" -v
srv_spawn "$dir" proxy swift-proxy-server "$dir/etc/proxy-server.conf" -v

endpoint="http://127.0.0.1:$proxy_port"
# Ready when a SigV4-signed S3 ListBuckets is answered 200 (proves proxy,
# memcached, tempauth, s3api and the account server).
/usr/bin/python3 "$here/s3probe.py" "$endpoint" test:tester testing 90

srv_started "$dir"
cat >"$dir/env" <<ENV
S3_ENDPOINT=$endpoint
S3_REGION=us-east-1
S3_ACCESS_KEY=test:tester
S3_SECRET_KEY=testing
SWIFT_AUTH_URL=$endpoint/auth/v1.0
S3_VHOST_DOMAIN=s3.localhost
SWIFT_RACK_USER=rack:rackuser
SWIFT_RACK_KEY=rackkey
SWIFT_READER_USER=test:reader
SWIFT_READER_KEY=reader
ENV
cat "$dir/env"
