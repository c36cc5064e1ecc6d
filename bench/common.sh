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
