#!/usr/bin/env bash
# test_s3_errpage.sh - a server that answers a GET with 200 and an error
# document under the object's own ETag (tests/servers/s3_hostile.py,
# bucket "errpage": "small" is 6 bytes, "big" 200000, each GET a 62-byte
# <Error>). The document is not the object: a read fails (EIO) with a
# log line naming the key, with attr_timeout 0 or the default, the read
# cache on or off. It was served as the file: "small" read "<?xml ", and
# "big" read as the 62-byte document (outside tester s40-t2).
. "$(dirname "$0")/lib.sh"

start_script_server s3_hostile.py
export ERRP_ACCESS_KEY_ID=k ERRP_SECRET_ACCESS_KEY=s
M=$T/mnt
n=0
for opts in "read_cache=off" "read_cache=off attr_timeout=0" \
	"read_cache=on"; do
	n=$((n + 1))
	# shellcheck disable=SC2086 # one KEY=VALUE per word
	new_config "$T/c$n.conf" s $opts
	cfg_raw "[backend s]
type = s3
endpoint = http://127.0.0.1:$SCRIPT_PORT
bucket = errpage
path_style = true
credentials_env = ERRP
"
	mount_smux "$T/c$n.conf" "$M"
	[ "$(stat -c %s "$M/small")" = 6 ] || fail "$opts: small is not 6 bytes"
	for f in small big; do
		rc=0
		timeout 30 cat "$M/$f" >"$T/out" 2>"$T/err" || rc=$?
		[ "$rc" -ne 0 ] ||
			fail "$opts: $f read as $(wc -c <"$T/out") bytes: $(head -c 20 "$T/out")"
		grep -q "Input/output error" "$T/err" ||
			fail "$opts: $f: $(cat "$T/err")"
	done
	unmount_smux "$M"
	grep -q "read big: .*not its content\|get.*big" "$T/smuxfs.$n.log" ||
		fail "$opts: no log line names big"
	log "$opts: a 200 with an error document under the ETag is EIO"
done

# The same page sent without an ETag (a captive portal's, a proxy's) on a
# failover [s, f] whose f holds the objects: the read goes to f. Before,
# every read failed (ESTALE; EIO on WebDAV) and f was never asked
# (s43-t2).
new_config "$T/fo.conf" m read_cache=off
cfg_mux m failover "s f"
cfg_raw "[backend s]
type = s3
endpoint = http://127.0.0.1:$SCRIPT_PORT
bucket = portal
path_style = true
credentials_env = ERRP
"
cfg_file f "$T/f"
mkdir -p "$T/f"
printf 'small\n' >"$T/f/small"
head -c 200000 /dev/urandom >"$T/f/big"
touch -d '2024-01-01 00:00:00 UTC' "$T/f/small" "$T/f/big"
mount_smux "$T/fo.conf" "$M"
for f in small big; do
	timeout 30 cmp "$T/f/$f" "$M/$f" || fail "failover: $f not read from f"
done
unmount_smux "$M"
log "failover: a 200 page without ETag from s, the read served by f"
kill "$SCRIPT_PID"
