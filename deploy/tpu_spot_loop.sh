#!/usr/bin/env bash
# A Spot Cloud TPU slice that comes back at whatever size there is, until the run is done. Run it
# outside the slice (a small VM, a laptop) from a podrl checkout, with podrl installed there (only
# `podrl retry-decision`, which starts no JAX, runs on this machine).
#
#   export TPU_NAME=podrl-spot ZONE=us-central2-b SHARE=10.0.0.2:/share
#   CKPT=/mnt/shared/runs/minatar/checkpoints deploy/tpu_spot_loop.sh anakin --preset minatar-ppo \
#       --num-envs 8192 --updates-per-call 4 --heartbeat-timeout-s 60 --checkpoint.every-updates 100 \
#       --logging.run-dir /mnt/shared/runs --logging.run-name minatar
#
# Each attempt: requests a Spot slice through a queued resource (`gcloud compute tpus queued-resources
# create --spot`), trying ACCELERATOR_TYPES in order, each for up to QUEUE_TIMEOUT_S; sets it up
# (deploy/tpu_vm.sh setup: Python 3.12, podrl, jax[tpu], the SHARE mounted and writable); runs the
# podrl command on every worker with `--checkpoint.directory CKPT`, resuming from CKPT once it holds
# a complete checkpoint (deploy/tpu_vm.sh run); tees this attempt's output to its own log in LOGS;
# deletes the queued resource and its slice; then asks `podrl retry-decision` (the rule of `podrl
# launch --supervise`): after a preemption stop ("stopped by SIGTERM") or a lost worker it goes
# again, after "done" it exits 0, after an error of the run itself (exit 1, 2, 3) it exits 1. A
# failed setup deletes the slice and exits 1; no capacity in any size waits RETRY_SLEEP_S.
# CKPT must be on the share (every worker reads and writes it) and --num-envs must divide over the
# devices of every size tried. AUTOCHECKPOINT=1 creates the slices with Autocheckpoint (Preview,
# `gcloud alpha`): before a maintenance event the workers then get a SIGTERM, which podrl turns into
# one agreed save, instead of losing the work since the last periodic checkpoint.
#
# Variables (defaults in brackets): CKPT (required); ACCELERATOR_TYPES [v4-32 v4-16 v4-8];
# RUNTIME_VERSION [tpu-ubuntu2204-base]; LOGS [./spot-logs]; MAX_ATTEMPTS [50]; QUEUE_TIMEOUT_S [3600];
# POLL_S [30]; RETRY_SLEEP_S [300]; AUTOCHECKPOINT [0]; PODRL [podrl: the podrl command here];
# and deploy/tpu_vm.sh's (TPU_NAME, ZONE, PODRL_REPO, PODRL_REF, JAX_SPEC, SHARE, MOUNT).
# Sources: https://cloud.google.com/tpu/docs/queued-resources, https://cloud.google.com/tpu/docs/spot,
# https://cloud.google.com/tpu/docs/autocheckpoint.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ACCELERATOR_TYPES=${ACCELERATOR_TYPES:-v4-32 v4-16 v4-8}
RUNTIME_VERSION=${RUNTIME_VERSION:-tpu-ubuntu2204-base}
LOGS=${LOGS:-spot-logs}
MAX_ATTEMPTS=${MAX_ATTEMPTS:-50}
QUEUE_TIMEOUT_S=${QUEUE_TIMEOUT_S:-3600}
POLL_S=${POLL_S:-30}
RETRY_SLEEP_S=${RETRY_SLEEP_S:-300}
AUTOCHECKPOINT=${AUTOCHECKPOINT:-0}
PODRL=${PODRL:-podrl}

say() {
  echo "[spot loop] $*"
}

release() {  # deletes the queued resource and the slice it holds
  gcloud compute tpus queued-resources delete "$TPU_NAME" --zone="$ZONE" --force --quiet ||
    say "could not delete the queued resource $TPU_NAME: delete it by hand"
}

request() {  # $1: an accelerator type; succeeds once a Spot slice of that type is ACTIVE
  local track=() extra=() waited=0 state
  if [ "$AUTOCHECKPOINT" = 1 ]; then
    track=(alpha)
    extra=(--autocheckpoint-enabled)
  fi
  gcloud "${track[@]}" compute tpus queued-resources create "$TPU_NAME" --zone="$ZONE" --node-id="$TPU_NAME" \
    --accelerator-type="$1" --runtime-version="$RUNTIME_VERSION" --spot "${extra[@]}" || return 1
  while [ "$waited" -lt "$QUEUE_TIMEOUT_S" ]; do
    state=$(gcloud compute tpus queued-resources describe "$TPU_NAME" --zone="$ZONE" --format='value(state.state)')
    case $state in
      ACTIVE) return 0 ;;
      FAILED|SUSPENDING|SUSPENDED) break ;;
    esac
    sleep "$POLL_S"
    waited=$((waited + POLL_S))
  done
  say "no $1 slice (${state:-no state}); releasing the request"
  release
  return 1
}

main() {
  [ $# -gt 0 ] || { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p;}' "${BASH_SOURCE[0]}" >&2; exit 2; }
  : "${TPU_NAME:?set TPU_NAME}" "${ZONE:?set ZONE}" "${CKPT:?set CKPT to a checkpoint folder on the share}"
  mkdir -p "$LOGS" || exit 1
  local stamp attempt type slice log code decision
  stamp=$(date +%Y%m%d-%H%M%S)
  for attempt in $(seq 1 "$MAX_ATTEMPTS"); do
    slice=""
    for type in $ACCELERATOR_TYPES; do
      if request "$type"; then slice=$type; break; fi
    done
    if [ -z "$slice" ]; then
      say "attempt $attempt: no capacity in any of $ACCELERATOR_TYPES; again in ${RETRY_SLEEP_S}s"
      sleep "$RETRY_SLEEP_S"
      continue
    fi
    say "attempt $attempt: a $slice slice is up"
    "$HERE/tpu_vm.sh" setup || { say "setup failed: stopping"; release; exit 1; }
    log="$LOGS/$stamp-attempt-$attempt-$slice.log"
    RESUME_FROM="$CKPT" "$HERE/tpu_vm.sh" run "$@" --checkpoint.directory "$CKPT" 2>&1 | tee "$log"
    code=${PIPESTATUS[0]}
    release
    decision=$("$PODRL" retry-decision --exit-code "$code" "$log") || { say "podrl retry-decision failed"; exit 1; }
    say "attempt $attempt (exit $code): $decision"
    case $decision in
      done:*) exit 0 ;;
      retry:*) ;;
      *) exit 1 ;;
    esac
  done
  say "$MAX_ATTEMPTS attempts used up"
  exit 1
}

main "$@"
