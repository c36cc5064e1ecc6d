#!/bin/sh
# Build resmpi, compile examples/hello_ring.c with our mpicc, run it on 4 ranks.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[ -d "$HOME/.cargo/bin" ] && PATH="$HOME/.cargo/bin:$PATH"
make all
mkdir -p build/examples
build/bin/mpicc -O2 -Wall -o build/examples/hello_ring examples/hello_ring.c
exec build/bin/mpiexec -n 4 build/examples/hello_ring
