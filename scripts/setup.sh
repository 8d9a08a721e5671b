#!/bin/bash
# setup.sh -- install what ztrain needs on Debian 12 (if missing) and build it
# in the source tree.  Run as root (or with sudo) on a fresh machine; safe to
# run again (it only installs what is missing and rebuilds what changed).
#   ZT_CONFIGURE_FLAGS  ./configure flags (default: --enable-werror, plus --with-cuda when
#                       /usr/local/cuda/bin/nvcc exists: the CUDA backend then builds and
#                       links everywhere, and its tests skip without a GPU)
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential autoconf automake libtool pkg-config
      openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools
      libopenblas-dev libjansson-dev libpcre2-dev libutf8proc-dev python3
      slurmctld slurmd slurm-client munge libslurm-dev lmod)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing: ${missing[*]}"
    if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
    # Debian starts munge/slurm services on install; ztrain's tests run their own.
    $SUDO systemctl disable --now slurmctld slurmd munge > /dev/null 2>&1 || true
fi

if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
    echo "== autogen"
    ./autogen.sh > /dev/null 2>&1 || ./autogen.sh
fi
if [ -z "${ZT_CONFIGURE_FLAGS+set}" ]; then
    ZT_CONFIGURE_FLAGS=--enable-werror
    [ -x /usr/local/cuda/bin/nvcc ] && ZT_CONFIGURE_FLAGS="$ZT_CONFIGURE_FLAGS --with-cuda"
fi
# reconfigure when the flags changed since the last configure
have_flags=
if [ -x config.status ]; then have_flags=$(eval "echo $(./config.status --config 2>/dev/null)"); fi
if [ ! -f Makefile ] || [ configure -nt Makefile ] || [ "$have_flags" != "$(echo $ZT_CONFIGURE_FLAGS)" ]; then
    echo "== configure $ZT_CONFIGURE_FLAGS"
    ./configure $ZT_CONFIGURE_FLAGS > config.out 2>&1 || { cat config.out; exit 1; }
    sed -n '/configuration summary/,/^---*$/p' config.out
fi
echo "== build"
make -j"$(nproc)" > build.log 2>&1 || { tail -40 build.log; exit 1; }
echo "== built ./ztrain and libtrain"
