#!/usr/bin/env bash
# podrl on every worker of a Cloud TPU VM slice, through `gcloud compute tpus tpu-vm ssh --worker=all`.
#
#   export TPU_NAME=my-pod ZONE=us-central2-b
#   deploy/tpu_vm.sh create                  # a slice: ACCELERATOR_TYPE, RUNTIME_VERSION (SPOT=1: a Spot slice)
#   deploy/tpu_vm.sh setup                   # every worker: Python 3.12 (uv), podrl and jax[tpu]
#   deploy/tpu_vm.sh run anakin --num-envs 8192 --rollout-length 32    # podrl <args> on every worker
#   deploy/tpu_vm.sh delete
#
# setup: on every worker, installs uv (https://docs.astral.sh/uv/) in ~/.local/bin, makes a Python 3.12
#   environment ~/podrl-venv with it (uv brings its own interpreter: the runtime's python3 is too old
#   for podrl), clones PODRL_REPO into ~/podrl (or updates it), checks out PODRL_REF, and installs
#   podrl and JAX_SPEC there. With SHARE (an NFS/Filestore export, host:/path): installs nfs-common,
#   mounts it at MOUNT and makes MOUNT/runs writable by every user (mode 1777), so runs and
#   checkpoints can go there. Running it again updates the checkout and the install.
# run: each worker runs `~/podrl-venv/bin/podrl <args> --distributed-auto` in a fresh shell (JAX finds
#   the slice itself); with RESUME_FROM (a checkpoint folder every worker reaches), `--resume
#   RESUME_FROM` is added once it holds a complete checkpoint (`podrl checkpoints`). The exit status
#   is gcloud's: the first failed worker's, 255 when ssh itself failed.
#
# Variables (defaults in brackets): TPU_NAME, ZONE (both required); ACCELERATOR_TYPE [v4-32];
# RUNTIME_VERSION [tpu-ubuntu2204-base]; SPOT [0]; PODRL_REPO and PODRL_REF [this checkout's origin
# URL and HEAD commit: push it first]; JAX_SPEC [jax[tpu]]; SHARE [none]; MOUNT [/mnt/shared];
# RESUME_FROM [none]. gcloud's own settings (project, account) are gcloud's.
# Sources: https://cloud.google.com/tpu/docs/jax-pods (ssh --worker=all), https://cloud.google.com/tpu/docs/runtimes,
# https://docs.astral.sh/uv/reference/installer, https://cloud.google.com/filestore/docs/access-control.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ACCELERATOR_TYPE=${ACCELERATOR_TYPE:-v4-32}
RUNTIME_VERSION=${RUNTIME_VERSION:-tpu-ubuntu2204-base}
SPOT=${SPOT:-0}
JAX_SPEC=${JAX_SPEC:-jax[tpu]}
SHARE=${SHARE:-}
MOUNT=${MOUNT:-/mnt/shared}
RESUME_FROM=${RESUME_FROM:-}

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p;}' "${BASH_SOURCE[0]}"
}

fail() {
  echo "tpu_vm.sh: $*" >&2
  exit 2
}

need_slice() {
  [ -n "${TPU_NAME:-}" ] || fail "set TPU_NAME to the slice's name (and ZONE to its zone)"
  [ -n "${ZONE:-}" ] || fail "set ZONE to the slice's zone (e.g. us-central2-b)"
}

on_every_worker() {  # $1: the command each worker's shell runs
  gcloud compute tpus tpu-vm ssh "$TPU_NAME" --zone="$ZONE" --worker=all --command="$1"
}

setup_command() {  # prints what every worker runs to set itself up
  local repo=${PODRL_REPO:-} ref=${PODRL_REF:-}
  [ -n "$repo" ] || repo=$(git -C "$HERE/.." remote get-url origin 2>/dev/null) ||
    fail "set PODRL_REPO to a git URL the workers can clone podrl from"
  [ -n "$ref" ] || ref=$(git -C "$HERE/.." rev-parse HEAD 2>/dev/null) ||
    fail "set PODRL_REF to the branch, tag or commit to run"
  printf 'set -euo pipefail; REPO=%q; REF=%q; JAX_SPEC=%q; SHARE=%q; MOUNT=%q\n' \
    "$repo" "$ref" "$JAX_SPEC" "$SHARE" "$MOUNT"
  cat <<'WORKER'
cd "$HOME"
if [ -n "$SHARE" ]; then
  apt=(sudo apt-get -q -o DPkg::Lock::Timeout=600)  # a fresh VM's unattended upgrades may hold the lock
  "${apt[@]}" update && "${apt[@]}" install -y nfs-common
  sudo mkdir -p "$MOUNT"
  mountpoint -q "$MOUNT" || sudo mount -t nfs "$SHARE" "$MOUNT"
  sudo install -d -m 1777 "$MOUNT/runs"
fi
if [ ! -x "$HOME/.local/bin/uv" ]; then
  curl -LsSf https://astral.sh/uv/install.sh | env UV_INSTALL_DIR="$HOME/.local/bin" UV_NO_MODIFY_PATH=1 sh
fi
[ -x podrl-venv/bin/python ] || "$HOME/.local/bin/uv" venv -p 3.12 --seed podrl-venv
[ -d podrl/.git ] || git clone -q "$REPO" podrl
git -C podrl fetch -q origin "$REF"
git -C podrl checkout -q --force FETCH_HEAD
"$HOME/.local/bin/uv" pip install -q --python podrl-venv/bin/python -e ./podrl "$JAX_SPEC"
echo "worker $(hostname): podrl $(git -C podrl rev-parse --short HEAD) in ~/podrl-venv"
WORKER
}

run_command() {  # prints what every worker runs for `run <args>`
  printf 'set -euo pipefail; RESUME_FROM=%q; ARGS=(' "$RESUME_FROM"
  printf ' %q' "$@"
  printf ' )\n'
  cat <<'WORKER'
cd "$HOME"
podrl=$HOME/podrl-venv/bin/podrl
[ -x "$podrl" ] || { echo "no $podrl on $(hostname): run deploy/tpu_vm.sh setup first" >&2; exit 2; }
if [ -n "$RESUME_FROM" ] && "$podrl" checkpoints "$RESUME_FROM" --last >/dev/null 2>&1; then
  ARGS+=(--resume "$RESUME_FROM")
fi
exec "$podrl" "${ARGS[@]}" --distributed-auto
WORKER
}

main() {
  local what=${1:-}
  case $what in
    create)
      need_slice
      local spot=()
      [ "$SPOT" = 1 ] && spot=(--spot)
      gcloud compute tpus tpu-vm create "$TPU_NAME" --zone="$ZONE" --accelerator-type="$ACCELERATOR_TYPE" \
        --version="$RUNTIME_VERSION" "${spot[@]}"
      ;;
    setup)
      need_slice
      local command
      command=$(setup_command)
      on_every_worker "$command"
      ;;
    run)
      need_slice
      shift
      [ $# -gt 0 ] || fail "give the podrl command to run: run anakin|sebulba [flags ...]"
      local command
      command=$(run_command "$@")
      on_every_worker "$command"
      ;;
    delete) need_slice; gcloud compute tpus tpu-vm delete "$TPU_NAME" --zone="$ZONE" --quiet ;;
    -h|--help|help) usage ;;
    *) usage >&2; exit 2 ;;
  esac
}

main "$@"
