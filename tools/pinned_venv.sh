# Sourced by tools/setup.sh and tools/wheel/toolchain.sh.
# pinned_venv VENV REQUIREMENTS WHO: a Python venv at VENV holding REQUIREMENTS' pins, installed again only
# when the requirements file changed since the last install (a copy of it is kept in the venv).
pinned_venv() {
  local venv="$1" req="$2" who="$3"
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
  fi
  if ! cmp -s "$req" "$venv/.requirements.txt"; then
    echo "$who: pip install -r $req" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
    cp "$req" "$venv/.requirements.txt"
  fi
}
