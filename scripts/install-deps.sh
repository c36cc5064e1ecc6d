#!/bin/sh
# Install what building and testing resmpi needs.  Idempotent; fast when all is present.
set -eu
PACKAGES="build-essential gfortran python3 python3-pytest mpich libmpich-dev openmpi-bin libopenmpi-dev netpipe-mpich2 iproute2 procps slurmctld slurmd slurm-client libpmix-dev pkg-config libhdf5-mpich-dev"

missing=
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" -eq 0 ]; then sudo=; else sudo=sudo; fi
    echo "install-deps: installing$missing"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q $missing
fi

if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
    echo "install-deps: installing the Rust stable toolchain with rustup"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs |
        sh -s -- -y --profile minimal --default-toolchain stable --component rustfmt,clippy
fi
exit 0
