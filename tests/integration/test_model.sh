#!/usr/bin/env bash
# test_model.sh MODE - model-based test (model.c) of one file on a mount of
# the standard MODE configuration: a seeded random sequence of writes at
# random offsets, truncates, reads, fsync, close/reopen and renames, every
# read compared with an in-memory model; then the final content through a
# fresh daemon and in the backing directories where the mode puts it.
#
# MODE is one of lib.sh's standard local configurations (mode_config) or a
# mount of network backends on loopback servers this test starts or
# shares (lib.sh: start_nginx_dav, use_s3rver, start_bunny_emu, use_swift):
#   s3-mirror  mirror of an s3 backend (s3rver, a bucket of its own) and an
#              http backend (nginx WebDAV)
#   s3-shield  shield: a file origin and an s3 mirror
#   bunny      a single bunny backend (the Bunny Storage emulator)
#   swift      a single swift backend (OpenStack Swift, tempauth)
# They run model.c's extra operations (SMUX_MODEL_EXTRA=1; =0 turns them
# off). Their final check reads each replica's storage (the bucket with
# tests/tools/s3_fetch.py, nginx's root, the emulator's zone directory, the
# container with swift download): each must hold the final file and not
# the other name.
#
# SMUX_IT_SEED (default 20261130) and SMUX_IT_STEPS (default 3000, 500 on
# network modes, 100 on swift) pick the sequence; a failure prints the
# seed and the step to replay it. SMUX_IT_FILES=N (default 1) runs N models at once, each on
# its own file (directories model, model1, ...; seeds SEED, SEED+1, ...).
. "$(dirname "$0")/lib.sh"

MODE=${1:?usage: test_model.sh MODE}
SEED=${SMUX_IT_SEED:-20261130}
FILES=${SMUX_IT_FILES:-1}
M=$T/mnt
CONF=$T/$MODE.conf

MODEL=${SMUX_IT_MODEL:-}
if [ -z "$MODEL" ]; then
	MODEL=$T/model
	cc -std=c11 -O2 -Wall -Wextra -Werror -o "$MODEL" \
		"$SMUX_REPO/tests/integration/model.c"
fi

# (not under `if`: errexit stays on inside the helpers)
NET=0
case $MODE in s3-mirror | s3-shield | bunny | swift) NET=1 ;; esac
if [ "$NET" = 1 ]; then
	net_config "$MODE" "$CONF"
	# a network run stays well under a minute in make check's lanes
	# (Swift's Python servers take ~30 ms a request here, ~20 requests a
	# step with the extras; s3-mirror's 1000 steps took 65-90 s there):
	# 500 steps, the first half of the sequence 1000 ran
	STEPS=500
	[ "$MODE" = swift ] && STEPS=100
	STEPS=${SMUX_IT_STEPS:-$STEPS}
	# and has the extra operations (model.c) unless SMUX_MODEL_EXTRA=0
	export SMUX_MODEL_EXTRA=${SMUX_MODEL_EXTRA:-1}
else
	mode_config "$MODE" "$CONF"
	STEPS=${SMUX_IT_STEPS:-3000}
fi
mount_smux "$CONF" "$M"

# FILES model runs at once, each on its own directory model$i (model0 is
# "model"), seeds SEED, SEED+1, ...: two files open for writing together.
mdir() { [ "$1" -eq 0 ] && echo model || echo "model$1"; }
log "seed $SEED, $STEPS steps, $FILES file(s)"
pids=()
for ((i = 0; i < FILES; i++)); do
	mkdir "$M/$(mdir $i)"
	"$MODEL" "$M/$(mdir $i)" $((SEED + i)) "$STEPS" "$T/expected$i" \
		>"$T/final$i" 2>"$T/model$i.log" &
	pids+=($!)
done
for ((i = 0; i < FILES; i++)); do
	rc=0
	wait "${pids[i]}" || rc=$?
	cat "$T/model$i.log" >&2
	[ "$rc" -eq 0 ] ||
		fail "model $(mdir $i) diverged (replay: SMUX_IT_SEED=$SEED SMUX_IT_STEPS=$STEPS SMUX_IT_FILES=$FILES $0 $MODE)"
done

# final_of I / other_of I: the final name of model I and the other one
final_of() { cat "$T/final$1"; }
other_of() { [ "$(final_of "$1")" = f1 ] && echo f0 || echo f1; }

for ((i = 0; i < FILES; i++)); do
	d=$(mdir $i)
	cmp "$T/expected$i" "$M/$d/$(final_of $i)"
	[ ! -e "$M/$d/$(other_of $i)" ] ||
		fail "$d/$(other_of $i) still exists after rename"
done

unmount_smux "$M"
if [ "$NET" = 1 ]; then
	case $COPIES in *s3copy*) s3rver_fetch "$T/s3copy" ;; esac
	case $COPIES in *swcopy*)
		mkdir -p "$T/swcopy"
		(cd "$T/swcopy" && "${SWIFT[@]}" download "$SWIFT_CONTAINER")
		;;
	esac
fi
for ((i = 0; i < FILES; i++)); do
	rel=$(mdir $i)/$(final_of $i)
	gone=$(mdir $i)/$(other_of $i)
	if [ "$NET" = 1 ]; then
		for d in $COPIES; do
			cmp "$T/expected$i" "$d/$rel" ||
				fail "$rel missing or different in $d"
			[ ! -e "$d/$gone" ] || fail "$d still holds $gone"
		done
	else
		mode_check_file "$MODE" "$rel" "$T/expected$i"
		for d in $(mode_backing_dirs "$CONF"); do
			[ ! -e "$d/$gone" ] || fail "$d still holds $gone"
		done
	fi
done

mount_smux "$CONF" "$M"
for ((i = 0; i < FILES; i++)); do
	cmp "$T/expected$i" "$M/$(mdir $i)/$(final_of $i)"
done
unmount_smux "$M"
stop_net_servers
