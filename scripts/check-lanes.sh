#!/usr/bin/env bash
# scripts/check-lanes.sh - the test passes of `make check`, in three lanes
# at once. The builds are done before and the lanes run the *-run targets,
# which build nothing: two makes building one file at once race.
#
#   unit lane:         make test (normal), make test (asan), the TSan
#                      build and make test-tsan
#   integration lanes: make test-integration (normal) | (asan)
#
# The integration tests spend most of their time waiting on mounts,
# fsyncs and servers (a normal pass used 1 min 40 s of CPU in 9 min), the
# unit lane is CPU work: side by side they take the longest lane's time
# instead of the sum (one after the other they had reached 24 of CI's 30
# minutes, two lanes 25 with this session's backends). Tests that make a
# private mount namespace let go of the FUSE mounts it copied, so one
# lane's mounts never keep another lane's daemons alive.
# The integration lanes' output is kept in files and printed after the
# unit lane's; the exit status is non-zero when any lane failed. An
# interrupt stops them all.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
MAKE=${MAKE:-make}

dir=$(mktemp -d "${TMPDIR:-/tmp}/smux-check-lanes.XXXXXX")
pids=()
for v in normal asan; do
	# each lane leaves some tests to the other (run.sh:
	# asan_lane_leaves, normal_lane_leaves)
	SMUX_IT_LANE=$v $MAKE --no-print-directory VARIANT=$v test-integration-run \
		>"$dir/it-$v.log" 2>&1 &
	pids+=($!)
done
# shellcheck disable=SC2317 # called by the trap
stop() {
	for p in "${pids[@]}"; do
		pkill -TERM -P "$p" 2>/dev/null
		kill -TERM "$p" 2>/dev/null
	done
	exit 130
}
trap stop INT TERM

# The TSan test binaries are built here, in the unit lane (they share no
# file with the other lanes' builds, which are done): 31 s of two cores
# that were on the critical path before the integration lanes began.
unit=0
{
	$MAKE --no-print-directory VARIANT=normal test-run &&
		$MAKE --no-print-directory VARIANT=asan test-run &&
		$MAKE --no-print-directory -j2 VARIANT=tsan test-tsan-build &&
		$MAKE --no-print-directory VARIANT=tsan test-tsan-run
} || unit=$?

rc=$unit
summary="unit lane exit $unit"
i=0
for v in normal asan; do
	it=0
	wait "${pids[$i]}" || it=$?
	i=$((i + 1))
	echo "==================== integration lane ($v) ===================="
	cat "$dir/it-$v.log"
	summary="$summary, integration ($v) exit $it"
	[ "$it" -eq 0 ] || rc=$it
done
rm -rf "$dir"
echo "check lanes: $summary"
exit "$rc"
