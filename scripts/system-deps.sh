#!/usr/bin/env bash
# Installs the Debian packages the test suite uses (run by `make test`):
#   chromium            - the HTML report is checked in a real headless browser
#   dataset-fashion-mnist - the full Fashion-MNIST, read by the dataset tests and experiments
# Installs only what is missing; says clearly what to do where it cannot install.
set -euo pipefail
packages=(chromium dataset-fashion-mnist)
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "installing system packages: ${missing[*]}"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "gspdml: the test suite needs the Debian packages: ${missing[*]}" >&2
  echo "        install them with: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
