#!/usr/bin/env bash
# test_tls.sh - the network backends' TLS: an nginx WebDAV server on
# loopback with a certificate from a CA of the test's own. Without
# `ca_file` the certificate is refused (verification is on: writes fail
# with an error that says why, nothing lands on the server); with
# `ca_file` naming that CA the same mount works: cp, reads, ls, rm. A
# ca_file that cannot be read, a zero connect_timeout and a part_size out
# of S3's bounds are refused when the daemon starts, naming the key.
. "$(dirname "$0")/lib.sh"

NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if [ ! -x "$NGINX" ] || [ ! -f /usr/lib/nginx/modules/ngx_http_dav_ext_module.so ]; then
	log "*** SKIPPED: nginx or libnginx-mod-http-dav-ext missing (scripts/install-deps.sh installs them) ***"
	exit 0
fi
command -v openssl >/dev/null || fail "openssl missing (scripts/install-deps.sh installs it)"

# a CA, and a certificate it signs for 127.0.0.1
PKI=$T/pki
mkdir -p "$PKI"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=smuxfs test CA" \
	-keyout "$PKI/ca.key" -out "$PKI/ca.pem" >/dev/null 2>&1 ||
	fail "cannot make the test CA"
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
	-keyout "$PKI/server.key" -out "$PKI/server.csr" >/dev/null 2>&1 ||
	fail "cannot make the server key"
printf 'subjectAltName = IP:127.0.0.1\n' >"$PKI/ext.cnf"
openssl x509 -req -in "$PKI/server.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca.key" \
	-CAcreateserial -days 2 -extfile "$PKI/ext.cnf" -out "$PKI/server.pem" \
	>/dev/null 2>&1 || fail "cannot sign the server certificate"

# nginx with TLS, in the foreground, everything under $T/ng
NG=$T/ng
mkdir -p "$NG/root"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -e "s#@DIR@#$NG#g; s#@ROOT@#$NG/root#g" \
	-e "s#listen 127.0.0.1:@PORT@;#listen 127.0.0.1:$PORT ssl; ssl_certificate $PKI/server.pem; ssl_certificate_key $PKI/server.key;#" \
	-e "s#@USER@#$([ "$(id -u)" = 0 ] && echo 'user root;')#" \
	"$SMUX_REPO/tests/servers/nginx-dav.conf" >"$NG/nginx.conf"
grep -q " ssl;" "$NG/nginx.conf" || fail "nginx-dav.conf: no listen line to turn into TLS"
"$NGINX" -e "$NG/server.log" -p "$NG" -c "$NG/nginx.conf" >"$NG/server.log" 2>&1 &
NGPID=$!
for ((i = 0; i < 200; i++)); do
	curl -s -o /dev/null --cacert "$PKI/ca.pem" "https://127.0.0.1:$PORT/" && break
	kill -0 "$NGPID" 2>/dev/null || { cat "$NG/server.log" >&2; fail "nginx exited"; }
	sleep 0.1
done
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$PKI/ca.pem" "https://127.0.0.1:$PORT/" || true)
[ "$code" != 000 ] || fail "nginx does not answer over TLS"
log "nginx with TLS on 127.0.0.1:$PORT (pid $NGPID)"

# a mount of the WebDAV server alone; $1: extra backend lines
dav_config() {
	new_config "$1" d
	cfg_raw "[backend d]
type = http
url = https://127.0.0.1:$PORT/
$2"
}

# 1. no ca_file: the system's bundle does not know the CA
CONF=$T/untrusted.conf
dav_config "$CONF" "connect_timeout = 5s"
M=$T/mnt
mount_smux "$CONF" "$M"
LOG1=$T/smuxfs.$_SMUX_NLOG.log
echo data >"$T/small"
expect_fail "" cp "$T/small" "$M/small"
[ ! -e "$NG/root/small" ] || fail "an unverified server got the file"
unmount_smux "$M"
[ -f "$LOG1" ] || fail "no daemon log at $LOG1"
grep -q "certificate is not trusted" "$LOG1" ||
	fail "the daemon's log does not say the certificate was refused: $(cat "$LOG1")"
log "without ca_file: the certificate is refused, nothing written"

# 2. ca_file names the CA: the same server works
CONF=$T/trusted.conf
dav_config "$CONF" "ca_file = $PKI/ca.pem
connect_timeout = 5s
idle_timeout = 20s"
mount_smux "$CONF" "$M"
head -c $((3 * 1024 * 1024)) /dev/urandom >"$T/big"
cp "$T/small" "$T/big" "$M/"
mkdir "$M/dir"
cp "$T/small" "$M/dir/inner"
cmp "$T/big" "$NG/root/big"
cmp "$T/small" "$NG/root/dir/inner"
cmp "$T/big" "$M/big"
[ "$(ls "$M" | tr '\n' ' ')" = "big dir small " ] ||
	fail "listing over TLS: $(ls "$M" | tr '\n' ' ')"
rm -r "$M/dir" "$M/small"
[ ! -e "$NG/root/small" ] && [ ! -e "$NG/root/dir" ] || fail "rm over TLS left files"
unmount_smux "$M"
log "with ca_file: cp, reads, ls and rm over TLS"

# 3. refused at start, naming the key
CONF=$T/bad.conf
dav_config "$CONF" "ca_file = $T/no-such-ca.pem"
expect_fail "ca_file: $T/no-such-ca.pem" timeout 20 "$SMUXFS" "$CONF" "$M" -f
dav_config "$CONF" "connect_timeout = 0"
expect_fail "connect_timeout" timeout 20 "$SMUXFS" "$CONF" "$M" -f
new_config "$CONF" s
cfg_raw "[backend s]
type = s3
endpoint = https://127.0.0.1:$PORT
bucket = never-used
credentials_env = SMUX_TLS_UNUSED
part_size = 1M"
SMUX_TLS_UNUSED_ACCESS_KEY_ID=x SMUX_TLS_UNUSED_SECRET_ACCESS_KEY=y \
	expect_fail "part_size: 5 MiB to 5 GiB" timeout 20 "$SMUXFS" "$CONF" "$M" -f
mountpoint -q "$M" && fail "a refused config mounted"
log "bad ca_file, connect_timeout and part_size refused, naming the key"

kill -TERM "$NGPID" 2>/dev/null || true
wait "$NGPID" 2>/dev/null || true
