# Shared by scripts/demo.sh and scripts/test.sh: install what Linerate needs on a fresh machine.

need_root_for_apt() {
  if [ "$(id -u)" != 0 ]; then
    echo "Missing packages ($*) and not root: run as root, or install them with apt-get." >&2
    exit 1
  fi
}

# apt_install PKG...: installs the Debian packages that are not installed yet.
apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  need_root_for_apt "${missing[@]}"
  echo "Installing ${missing[*]} ..."
  # tshark's package asks whether non-root users may capture; answer it up front.
  echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections
  # Wait for the dpkg lock rather than fail: another install on the machine may hold it.
  apt-get -o DPkg::Lock::Timeout=600 update -q
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q "${missing[@]}"
}

# Rust comes from the machine image (rustup); Debian's own rustc is too old for this workspace.
ensure_rust() {
  if ! command -v cargo >/dev/null 2>&1; then
    for d in "$HOME/.cargo/bin" /root/.cargo/bin /usr/local/cargo/bin; do
      [ -x "$d/cargo" ] && export PATH="$d:$PATH" && break
    done
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo not found: Linerate needs Rust 1.89 or newer (rustup)." >&2
    exit 1
  fi
  local v
  v=$(rustc --version | awk '{print $2}')
  if [ "$(printf '%s\n1.89.0\n' "$v" | sort -V | head -n1)" != "1.89.0" ]; then
    echo "rustc $v is too old: Linerate needs 1.89 or newer." >&2
    exit 1
  fi
}
