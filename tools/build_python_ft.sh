#!/bin/sh
# Build a free-threaded CPython 3.13 ("3.13t", configure --disable-gil) once and cache it.
#
# Usage: tools/build_python_ft.sh PREFIX
#
# No free-threaded interpreter installs from the package registries this project uses, so
# this builds one from Debian trixie's python3.13 source package (the upstream tarball it
# carries; Debian's own patches are skipped so the result is a plain upstream build with the
# usual site-packages layout). A second run finds PREFIX/bin/python3.13t and does nothing.
# The build takes about 8 minutes on 2 cores. It needs root (or sudo) the first time, to add
# a deb-src entry and install any missing build dependencies.
set -eu

prefix=${1:?usage: tools/build_python_ft.sh PREFIX}
python="$prefix/bin/python3.13t"

is_ft='import ssl, sysconfig; assert sysconfig.get_config_var("Py_GIL_DISABLED") == 1'
if [ -x "$python" ] && "$python" -c "$is_ft" 2>/dev/null; then
    echo "build_python_ft: cached: $python"
    exit 0
fi

if [ "$(id -u)" = 0 ]; then as_root=""; else as_root="sudo"; fi

# The Debian mirror the machine already uses for its own packages (deb822 or one-line form).
mirror=$(grep -rhoE '(URIs:[[:space:]]*|^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)https?://[^[:space:]]+/debian/?' \
    /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null | grep -oE 'https?://[^[:space:]]+' | head -n 1 || true)
if [ -z "$mirror" ]; then
    echo "build_python_ft: no Debian mirror found in /etc/apt/sources.list*" >&2
    exit 1
fi

src_list=/etc/apt/sources.list.d/nats-sync-trixie-src.sources
if [ ! -f "$src_list" ]; then
    echo "build_python_ft: adding deb-src for trixie from $mirror"
    # Source indexes only: no binary package of the running system comes from trixie.
    printf 'Types: deb-src\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$mirror" | $as_root tee "$src_list" >/dev/null
fi
$as_root apt-get update -qq

missing=""
for pkg in build-essential dpkg-dev pkg-config libssl-dev libffi-dev zlib1g-dev libbz2-dev \
        liblzma-dev libsqlite3-dev uuid-dev libreadline-dev libncurses-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
    echo "build_python_ft: installing build dependencies:$missing"
    # shellcheck disable=SC2086
    $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
fi

work="$prefix.build"
rm -rf "$work"
mkdir -p "$work"
cd "$work"
apt-get source --download-only python3.13/trixie
dsc=$(ls python3.13_*.dsc | head -n 1)
dpkg-source --skip-patches -x "$dsc" src
cd src

./configure --disable-gil --prefix="$prefix" --with-ensurepip=install >configure.log 2>&1 \
    || { tail -n 40 configure.log >&2; exit 1; }
jobs=$(nproc 2>/dev/null || echo 2)
make -j"$jobs" >make.log 2>&1 || { tail -n 60 make.log >&2; exit 1; }
make install >install.log 2>&1 || { tail -n 40 install.log >&2; exit 1; }

"$python" -c "$is_ft; import sys; print('build_python_ft: built', sys.version)"
cd /
rm -rf "$work"
