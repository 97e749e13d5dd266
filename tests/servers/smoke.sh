#!/bin/sh
# tests/servers/smoke.sh [swift|s3rver|all] - proves the S3 test servers
# with the aws CLI (Debian awscli): starts the server in a temp dir,
# creates a bucket, puts, gets (byte for byte), lists and deletes an object
# with an awkward key (space, +, %, *, ~, unicode), uploads a 12 MiB file
# in two multipart parts and reads it back, then stops the server (also
# on failure, by trap). Exit status 0 when every step passed, 1 otherwise.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
which=${1:-all}
AWS=/usr/bin/aws
[ -x "$AWS" ] || {
	echo "smoke.sh: $AWS missing (scripts/install-deps.sh installs awscli)" >&2
	exit 1
}

run_one()
{
	server=$1
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/smux-smoke-$server.XXXXXX")
	# shellcheck disable=SC2064
	trap "'$here/$server.sh' stop '$tmp/srv' >/dev/null 2>&1 || true; rm -rf '$tmp'" EXIT
	t0=$(date +%s)
	"$here/$server.sh" start "$tmp/srv" >/dev/null
	t1=$(date +%s)
	. "$tmp/srv/env"
	# the CLI sees only these settings, never ~/.aws
	export AWS_ACCESS_KEY_ID="$S3_ACCESS_KEY" AWS_SECRET_ACCESS_KEY="$S3_SECRET_KEY"
	export AWS_DEFAULT_REGION="$S3_REGION" AWS_CONFIG_FILE="$tmp/config"
	export AWS_SHARED_CREDENTIALS_FILE="$tmp/credentials" AWS_PAGER=""
	printf '[default]\ns3 =\n  addressing_style = path\n' >"$AWS_CONFIG_FILE"
	aws()
	{
		"$AWS" --endpoint-url "$S3_ENDPOINT" "$@"
	}
	key='dir/a b+c%d*e~f (1) é.txt'
	bucket=smoke-bucket
	printf 'hello from smuxfs smoke\n' >"$tmp/small"
	aws s3api create-bucket --bucket "$bucket" >/dev/null
	aws s3api put-object --bucket "$bucket" --key "$key" --body "$tmp/small" >/dev/null
	aws s3api get-object --bucket "$bucket" --key "$key" "$tmp/small.back" >/dev/null
	cmp "$tmp/small" "$tmp/small.back"
	listed=$(aws s3api list-objects-v2 --bucket "$bucket" --prefix 'dir/' \
		--query 'Contents[].Key' --output text)
	[ "$listed" = "$key" ] || {
		echo "$server: listing gave [$listed], want [$key]" >&2
		return 1
	}
	aws s3api delete-object --bucket "$bucket" --key "$key" >/dev/null
	left=$(aws s3api list-objects-v2 --bucket "$bucket" --query 'length(Contents || `[]`)' --output text)
	[ "$left" = "0" ] || {
		echo "$server: $left keys left after delete" >&2
		return 1
	}
	# a 12 MiB multipart upload in two parts (8 MiB + 4 MiB), step by step
	head -c 12582912 /dev/urandom >"$tmp/big"
	head -c 8388608 "$tmp/big" >"$tmp/part1"
	tail -c 4194304 "$tmp/big" >"$tmp/part2"
	mkey='multi part/big+1.bin'
	upload=$(aws s3api create-multipart-upload --bucket "$bucket" --key "$mkey" \
		--query UploadId --output text)
	e1=$(aws s3api upload-part --bucket "$bucket" --key "$mkey" --part-number 1 \
		--upload-id "$upload" --body "$tmp/part1" --query ETag --output text)
	e2=$(aws s3api upload-part --bucket "$bucket" --key "$mkey" --part-number 2 \
		--upload-id "$upload" --body "$tmp/part2" --query ETag --output text)
	printf '{"Parts":[{"PartNumber":1,"ETag":%s},{"PartNumber":2,"ETag":%s}]}' \
		"$(printf '%s' "$e1" | jq -R .)" "$(printf '%s' "$e2" | jq -R .)" >"$tmp/parts.json"
	aws s3api complete-multipart-upload --bucket "$bucket" --key "$mkey" \
		--upload-id "$upload" --multipart-upload "file://$tmp/parts.json" >/dev/null
	etag=$(aws s3api head-object --bucket "$bucket" --key "$mkey" \
		--query ETag --output text)
	size=$(aws s3api head-object --bucket "$bucket" --key "$mkey" \
		--query ContentLength --output text)
	[ "$size" = 12582912 ] || {
		echo "$server: multipart object has size $size" >&2
		return 1
	}
	# Swift gives the S3 multipart ETag "<md5>-2"; s3rver the whole MD5
	case $server:$etag in
	swift:*-2\"* | swift:*-2 | s3rver:*) ;;
	*)
		echo "$server: ETag $etag is not a 2-part multipart ETag" >&2
		return 1
		;;
	esac
	aws s3api get-object --bucket "$bucket" --key "$mkey" "$tmp/big.back" >/dev/null
	cmp "$tmp/big" "$tmp/big.back"
	aws s3api delete-object --bucket "$bucket" --key "$mkey" >/dev/null
	aws s3api delete-bucket --bucket "$bucket"
	t2=$(date +%s)
	"$here/$server.sh" stop "$tmp/srv"
	rm -rf "$tmp"
	trap - EXIT
	echo "smoke $server: ok (start $((t1 - t0))s, requests $((t2 - t1))s)"
}

failed=0
passed=0
case $which in
all) servers="swift s3rver" ;;
swift | s3rver) servers=$which ;;
*)
	echo "usage: $0 [swift|s3rver|all]" >&2
	exit 2
	;;
esac
for s in $servers; do
	if (run_one "$s"); then
		passed=$((passed + 1))
	else
		echo "smoke $s: FAILED" >&2
		failed=$((failed + 1))
	fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
