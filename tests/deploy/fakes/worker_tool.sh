#!/bin/sh
# The tools a fresh TPU VM worker's setup calls, faked (the fake gcloud links each name here): each
# records its call in FAKE_STATE/worker-calls.log (worker, tool, arguments) and does the least the
# next step needs. A tool named in FAKE_FAIL fails. No network, no root, nothing installed: the
# environment `uv venv` makes runs the test's own Python (FAKE_PYTHON), podrl as it is checked out.
tool=$(basename "$0")
printf '%s\t%s\t%s\n' "${FAKE_WORKER:-?}" "$tool" "$*" >> "$FAKE_STATE/worker-calls.log"
case " ${FAKE_FAIL:-} " in
  *" $tool "*) echo "$tool: failing, as the test asked" >&2; exit 1 ;;
esac
last() { for word in "$@"; do :; done; printf '%s' "$word"; }
case $tool in
  sudo) exec "$@" ;;
  mountpoint) exit 1 ;;  # nothing is mounted yet
  curl)  # the uv installer: a script that puts the fake uv where the real one goes
    # shellcheck disable=SC2016  # expanded by the sh that runs the printed installer
    printf 'mkdir -p "${UV_INSTALL_DIR:-$HOME/.local/bin}" && ln -sf "%s" "${UV_INSTALL_DIR:-$HOME/.local/bin}/uv"\n' \
      "$(dirname "$(readlink -f "$0")")/worker_tool.sh" ;;
  git)
    case " $* " in
      *" clone "*) mkdir -p "$(last "$@")/.git" ;;
      *" rev-parse "*) echo 0123abc ;;
    esac ;;
  worker_tool.sh|uv)  # installed by the fake curl as ~/.local/bin/uv
    case $1 in
      venv)
        dir=$(last "$@")
        mkdir -p "$dir/bin"
        printf '#!/bin/sh\nexec "%s" "$@"\n' "$FAKE_PYTHON" > "$dir/bin/python"
        chmod +x "$dir/bin/python" ;;
      pip)  # uv pip install --python ENV/bin/python -e ./podrl SPEC: the podrl command of ENV
        python=$(printf '%s\n' "$@" | sed -n '/^--python$/{n;p;}')
        printf '#!/bin/sh\nexec "%s" -m podrl "$@"\n' "$FAKE_PYTHON" > "$(dirname "$python")/podrl"
        chmod +x "$(dirname "$python")/podrl" ;;
    esac ;;
esac
exit 0
