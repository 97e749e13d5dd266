#!/usr/bin/env bash
# test_s3_stream_swift.sh - the s3 writer against OpenStack Swift's S3 API
# (tests/servers/swift.sh: strict SigV4, and it lists multipart uploads,
# which s3rver cannot), through a mount of one s3 backend (part_size 5M):
#  - a file written in order and still open has its upload listed
#    (ListMultipartUploads) with at least 3 parts (ListParts); after close
#    the object is byte-exact with its mode, and no upload is left;
#  - a file written past a part, then unlinked while open and closed (its
#    writer closed without a commit) leaves no upload and no object.
. "$(dirname "$0")/lib.sh"

command -v aws >/dev/null || fail "aws CLI missing (scripts/install-deps.sh installs awscli)"
swift_server
# shellcheck disable=SC1091
. "$SWIFT_DIR/env"
B=smux-stream-$$-$RANDOM
awsc() {
	AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY \
		AWS_DEFAULT_REGION=$S3_REGION aws --endpoint-url "$S3_ENDPOINT" "$@"
}
awsc s3api create-bucket --bucket "$B" >/dev/null || fail "cannot create bucket $B"
log "Swift's S3 API at $S3_ENDPOINT, bucket $B"

export SW3_ACCESS_KEY_ID=$S3_ACCESS_KEY SW3_SECRET_ACCESS_KEY=$S3_SECRET_KEY
CONF=$T/s3.conf
new_config "$CONF" s
cfg_raw "[backend s]
type = s3
endpoint = $S3_ENDPOINT
bucket = $B
credentials_env = SW3
part_size = 5M
multipart_threshold = 5M
"
M=$T/mnt
mount_smux "$CONF" "$M"

head -c $((16 << 20)) /dev/urandom >"$T/src"

# uploads: the keys of the bucket's open multipart uploads ("" when none:
# the CLI prints None for an empty list)
uploads() {
	awsc s3api list-multipart-uploads --bucket "$B" \
		--query 'Uploads[].Key' --output text | sed '/^None$/d'
}
# holder FILE [unlink]: writes $T/src into FILE in 1 MiB writes and keeps
# it open until $T/go exists (bounded), unlinking it first with "unlink"
holder() {
	rm -f "$T/go" "$T/written"
	python3 - "$1" "$T/src" "$T/written" "$T/go" "${2:-}" <<'EOF' &
import os, sys, time
path, src, written, go, unlink = sys.argv[1:6]
data = open(src, "rb").read()
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
for off in range(0, len(data), 1 << 20):
    os.pwrite(fd, data[off:off + (1 << 20)], off)
open(written, "w").close()
for _ in range(6000):  # far longer than wait_upload looks
    if os.path.exists(go):
        break
    time.sleep(0.05)
if unlink:
    os.unlink(path)
os.close(fd)
EOF
	HOLDER=$!
}
# wait_upload KEY: until the upload of KEY lists 3 parts (60 s at most,
# the holder keeps the file open far longer), then lets the holder go on
wait_upload() {
	local id n=0 end=$((SECONDS + 60))
	while [ "$SECONDS" -lt "$end" ]; do
		id=$(awsc s3api list-multipart-uploads --bucket "$B" \
			--query "Uploads[?Key=='$1'].UploadId | [0]" --output text)
		if [ -n "$id" ] && [ "$id" != None ]; then
			n=$(awsc s3api list-parts --bucket "$B" --key "$1" \
				--upload-id "$id" --query 'length(Parts)' --output text)
			[ "$n" -ge 3 ] && break
		fi
		sleep 0.2
	done
	touch "$T/go"
	[ "$n" -ge 3 ] || fail "$1: $n parts listed while it was open"
	log "$1: upload listed with $n parts while open"
}

# 1. streamed while open, whole after close, no upload left
holder "$M/big"
wait_upload big
wait "$HOLDER" || fail "writer of big failed"
cmp "$M/big" "$T/src" || fail "big differs through the mount"
[ "$(stat -c %a "$M/big")" = 640 ] || fail "big has mode $(stat -c %a "$M/big")"
[ -z "$(uploads)" ] || fail "uploads left after close: $(uploads)"

# 2. unlinked while open: the writer closes without a commit
holder "$M/gone" unlink
wait_upload gone
wait "$HOLDER" || fail "writer of gone failed"
for ((i = 0; i < 100; i++)); do
	[ -z "$(uploads)" ] && break
	sleep 0.1
done
[ -z "$(uploads)" ] || fail "uploads left after an unlinked file's close: $(uploads)"
if awsc s3api head-object --bucket "$B" --key gone >/dev/null 2>&1; then
	fail "gone was stored"
fi
unmount_smux "$M"
log "ok"
