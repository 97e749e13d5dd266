#!/usr/bin/env bash
# test_cdn_misconfig.sh - a configuration error that only a server can
# see is reported clearly without -d: the mount itself asks nothing (a
# server that is down at mount time is a member that is down), so the
# first calls meet it; each call fails (EINVAL), the daemon's default log
# has the error at error level exactly once (not once per request), and
# .smux/events has one storage-mux.backend.misconfigured event naming the
# backend, the key to fix (region) and the server's reason.
#   (a) type = bunny, region = ny, a wrong zone password, endpoint = the
#       Bunny emulator: 401, which Bunny also answers to a zone asked at
#       another region's host
#   (b) type = swift, auth_version = 2, region = SYD, which the identity
#       v2.0 emulator's catalog lacks (it has DFW and ORD); no Swift
#       behind it: the error comes from the catalog
# After the error, a fixed configuration on the same servers works, and
# the event is not repeated by more failing calls.
. "$(dirname "$0")/lib.sh"

start_bunny_emu "$T/bn" edge emu-secret
start_swift_identity "$T/idn" -
printf 'not-the-password\n' >"$T/wrong.key"
chmod 600 "$T/wrong.key"

# check_reported MNT LOG NAME WHAT: calls through MNT fail with EINVAL;
# LOG has one error line, the misconfigured event of NAME naming region
# and WHAT; .smux/events has that event once
check_reported() {
	local mnt=$1 logf=$2 name=$3 what=$4 i n ev
	for ((i = 0; i < 5; i++)); do
		expect_fail "Invalid argument" ls "$mnt"
		expect_fail "" cat "$mnt/some/file.txt"
		expect_fail "" mkdir "$mnt/d$i"
	done
	# events reach the log on the bus's dispatcher thread: give it time
	for ((i = 0; i < 50; i++)); do
		grep -q 'storage-mux.backend.misconfigured' "$logf" && break
		sleep 0.1
	done
	n=$(grep -c '^smuxfs: error: .*storage-mux.backend.misconfigured' "$logf") || true
	[ "$n" -eq 1 ] || fail "$n misconfigured error lines in the default log, want 1"
	# (the line is JSON: its quotes are escaped)
	grep '^smuxfs: error: .*storage-mux.backend.misconfigured' "$logf" |
		grep -F "\"name\":\"$name\"" | grep -F '"option":"region"' |
		sed 's/\\"/"/g' | grep -qF -- "$what" ||
		fail "the error line does not name $name, region and $what"
	jq -c 'select(.topic == "storage-mux.backend.misconfigured")' \
		"$mnt/.smux/events" >"$T/ev"
	n=$(wc -l <"$T/ev")
	[ "$n" -eq 1 ] || fail "$n misconfigured events in .smux/events, want 1"
	ev=$(cat "$T/ev")
	[ "$(jq -r .name <<<"$ev")" = "$name" ] || fail "event names $(jq -r .name <<<"$ev")"
	[ "$(jq -r .option <<<"$ev")" = region ] || fail "event option $(jq -r .option <<<"$ev")"
	[ "$(jq -r .code <<<"$ev")" = STORAGE_MUX.INVALID_OPTIONS ] ||
		fail "event code $(jq -r .code <<<"$ev")"
	jq -r .cause <<<"$ev" | grep -qF -- "$what" || fail "event cause: $(jq -r .cause <<<"$ev")"
	grep -q -e not-the-password -e "$IDN_APIKEY" "$logf" "$mnt/.smux/events" &&
		fail "a credential is in the log or the events"
	return 0
}

# ---- (a) bunny: wrong password / region ----
CONF=$T/bunny.conf
new_config "$CONF" bn
cfg_raw "[backend bn]
type = bunny
zone = edge
region = ny
endpoint = $BUNNY_URL
credentials_file = $T/wrong.key
"
M=$T/mnt
mount_smux "$CONF" "$M"
check_reported "$M" "$T/smuxfs.$_SMUX_NLOG.log" bn 'primary region is not "ny"'
unmount_smux "$M"
log "(a) bunny: 401 reported once, naming region"

# ---- (b) swift v2: a region the catalog lacks ----
CONF=$T/swift.conf
new_config "$CONF" sw
cfg_raw "[backend sw]
type = swift
auth_url = $IDN_URL/v2.0
auth_version = 2
region = SYD
container = c1
credentials_file = $T/idn/cred
"
mount_smux "$CONF" "$M"
check_reported "$M" "$T/smuxfs.$_SMUX_NLOG.log" sw 'region "SYD" has no object-store'
unmount_smux "$M"
log "(b) swift: a region without an endpoint reported once, naming region"

# ---- the same servers with the configuration fixed ----
sed -i 's/^region = SYD/region = ORD/' "$CONF"
mount_smux "$CONF" "$M"
ls "$M" >/dev/null
unmount_smux "$M"
stop_net_servers
log "passed"
