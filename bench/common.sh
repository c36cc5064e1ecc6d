# Shared prelude of the benchmark scripts (sourced, not run). Expects OUT
# (output directory) and NAME (log prefix) to be set; sets RAW and LOG.
#
# Tunables inherited from the caller's shell would silently change what is
# measured (e.g. UCX_TLS, RESMPI_PATHS): start every MPI from a clean slate.
while read -r var; do
    unset "$var"
done < <(compgen -e | grep -v '^RESMPI_BUILD$' | grep -E '^(RESMPI_[A-Z_]*|UCX_[A-Z_]*|MPIR_CVAR_[A-Z_0-9]*|MPICH_[A-Z_]*|HYDRA_[A-Z_]*|FI_[A-Z_]*|OMPI_[A-Z_]*|PMIX_MCA_[A-Z_]*)$' || true)

RAW=$OUT/raw
LOG=$OUT/raw.log
mkdir -p "$OUT"
rm -rf "$RAW"
mkdir -p "$RAW"
: > "$LOG"
log() { printf '%s\n' "$*" >> "$LOG"; }
say() { printf '%s: %s\n' "$NAME" "$*"; log "# $*"; }

# The three MPIs compared, their compiler wrappers, and Open MPI's root knobs.
IMPLS=(resmpi mpich openmpi)
declare -A CC=([resmpi]=build/bin/mpicc [mpich]=mpicc.mpich [openmpi]=mpicc.openmpi)
declare -A OK=()
OMPI_ENV=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)

# build_each SOURCE: compile bench/SOURCE.c with every MPI's wrapper into
# $OUT/SOURCE-<impl>; OK[impl] says which built (resmpi is built first if needed).
build_each() {
    if [[ ! -x build/bin/mpicc || ! -x build/bin/mpiexec ]]; then
        say "building resmpi (make all)"
        make all >> "$LOG" 2>&1 || say "WARNING: make all failed (see $LOG)"
    fi
    local impl exe
    for impl in "${IMPLS[@]}"; do
        exe=$OUT/$1-$impl
        log "\$ ${CC[$impl]} -O2 -o $exe bench/$1.c"
        if command -v "${CC[$impl]}" >/dev/null 2>&1 && "${CC[$impl]}" -O2 -o "$exe" "bench/$1.c" >> "$LOG" 2>&1; then
            OK[$impl]=1
        else
            OK[$impl]=0
            say "$impl: build failed or ${CC[$impl]} missing; not measured"
        fi
    done
}

# launch_cmd IMPL RANKS EXE [resmpi options...] -> CMD: the launcher line.
launch_cmd() {
    local impl=$1 ranks=$2 exe=$3
    shift 3
    case $impl in
        resmpi)  CMD=(build/bin/mpiexec -n "$ranks" "$@" "$exe") ;;
        mpich)   CMD=(mpiexec.mpich -n "$ranks" "$exe") ;;
        openmpi) CMD=(env "${OMPI_ENV[@]}" mpiexec.openmpi --allow-run-as-root --oversubscribe -n "$ranks" "$exe") ;;
    esac
}
