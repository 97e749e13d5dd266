#!/usr/bin/env bash
# test_model.sh MODE - model-based test (model.c) of one file on a mount of
# the standard MODE configuration: a seeded random sequence of writes at
# random offsets, truncates, reads, fsync, close/reopen and renames, every
# read compared with an in-memory model; then the final content through a
# fresh daemon and in the backing directories where the mode puts it.
#
# SMUX_IT_SEED (default 20261130) and SMUX_IT_STEPS (default 3000) pick the
# sequence; a failure prints the seed and the step to replay it.
. "$(dirname "$0")/lib.sh"

MODE=${1:?usage: test_model.sh MODE}
SEED=${SMUX_IT_SEED:-20261130}
STEPS=${SMUX_IT_STEPS:-3000}
M=$T/mnt
CONF=$T/$MODE.conf

MODEL=${SMUX_IT_MODEL:-}
if [ -z "$MODEL" ]; then
	MODEL=$T/model
	cc -std=c11 -O2 -Wall -Wextra -Werror -o "$MODEL" \
		"$SMUX_REPO/tests/integration/model.c"
fi

mode_config "$MODE" "$CONF"
mount_smux "$CONF" "$M"
mkdir "$M/model"

log "seed $SEED, $STEPS steps"
final=$("$MODEL" "$M/model" "$SEED" "$STEPS" "$T/expected") ||
	fail "model diverged (replay: SMUX_IT_SEED=$SEED SMUX_IT_STEPS=$STEPS $0 $MODE)"
cmp "$T/expected" "$M/model/$final"
other=f1
[ "$final" = f1 ] && other=f0
[ ! -e "$M/model/$other" ] || fail "model/$other still exists after rename"

unmount_smux "$M"
mode_check_file "$MODE" "model/$final" "$T/expected"
for d in $(mode_backing_dirs "$CONF"); do
	[ ! -e "$d/model/$other" ] || fail "$d still holds model/$other"
done

mount_smux "$CONF" "$M"
cmp "$T/expected" "$M/model/$final"
unmount_smux "$M"
