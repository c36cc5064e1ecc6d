/* The PMIx client, through the real libpmix (Debian's libpmix2), loaded with
 * dlopen only when a PMIx process manager started the process (srun
 * --mpi=pmix, prterun): libmpi.so does not depend on libpmix, and a job
 * that never sees PMIX_NAMESPACE never loads it.  pmix.h gives the types
 * and constants; every function comes from dlsym.  Rust calls the
 * resmpi_pmix_* functions below (crates/runtime/src/pmix.rs); each returns
 * 0 on success, and resmpi_pmix_error() says what went wrong otherwise.
 * Built without pmix.h (RESMPI_HAVE_PMIX undefined) every call fails
 * saying so. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char error_text[512];

static void set_error(const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(error_text, sizeof error_text, format, arguments);
    va_end(arguments);
}

const char *resmpi_pmix_error(void) { return error_text; }

#ifdef RESMPI_HAVE_PMIX
#include <pmix.h>

typedef pmix_status_t (*init_fn)(pmix_proc_t *, pmix_info_t *, size_t);
typedef pmix_status_t (*finalize_fn)(const pmix_info_t *, size_t);
typedef pmix_status_t (*abort_fn)(int, const char[], pmix_proc_t[], size_t);
typedef pmix_status_t (*put_fn)(pmix_scope_t, const pmix_key_t, pmix_value_t *);
typedef pmix_status_t (*commit_fn)(void);
typedef pmix_status_t (*fence_fn)(const pmix_proc_t[], size_t, const pmix_info_t[], size_t);
typedef pmix_status_t (*get_fn)(const pmix_proc_t *, const pmix_key_t, const pmix_info_t[],
                                size_t, pmix_value_t **);
typedef const char *(*error_string_fn)(pmix_status_t);

static struct {
    init_fn init;
    finalize_fn finalize;
    abort_fn abort;
    put_fn put;
    commit_fn commit;
    fence_fn fence;
    get_fn get;
    error_string_fn error_string;
} api;

static pmix_proc_t me;

static const char *describe(pmix_status_t status)
{
    return api.error_string ? api.error_string(status) : "unknown PMIx status";
}

static int load(void)
{
    void *library = dlopen("libpmix.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (!library) {
        set_error("cannot load the PMIx library libpmix.so.2 (Debian: libpmix2): %s", dlerror());
        return -1;
    }
#define LOAD(field, name)                                                            \
    do {                                                                             \
        *(void **)&api.field = dlsym(library, name);                                 \
        if (!api.field) {                                                            \
            set_error("libpmix.so.2 has no %s", name);                               \
            return -1;                                                               \
        }                                                                            \
    } while (0)
    LOAD(init, "PMIx_Init");
    LOAD(finalize, "PMIx_Finalize");
    LOAD(abort, "PMIx_Abort");
    LOAD(put, "PMIx_Put");
    LOAD(commit, "PMIx_Commit");
    LOAD(fence, "PMIx_Fence");
    LOAD(get, "PMIx_Get");
    LOAD(error_string, "PMIx_Error_string");
#undef LOAD
    return 0;
}

/* An unsigned number from any integer value. */
static int value_number(const pmix_value_t *value, uint64_t *number)
{
    switch (value->type) {
    case PMIX_UINT8: *number = value->data.uint8; return 0;
    case PMIX_UINT16: *number = value->data.uint16; return 0;
    case PMIX_UINT32: *number = value->data.uint32; return 0;
    case PMIX_UINT64: *number = value->data.uint64; return 0;
    case PMIX_INT: *number = (uint64_t)value->data.integer; return 0;
    case PMIX_SIZE: *number = value->data.size; return 0;
    default: return -1;
    }
}

static void release(pmix_value_t *value)
{
    if (value->type == PMIX_STRING)
        free(value->data.string);
    free(value);
}

/* A number the process manager knows about `rank` (PMIX_RANK_WILDCARD: the
 * job) under `key`. */
static int get_number(pmix_rank_t rank, const char *key, uint64_t *number)
{
    pmix_proc_t proc = me;
    proc.rank = rank;
    pmix_value_t *value = NULL;
    pmix_status_t status = api.get(&proc, key, NULL, 0, &value);
    if (status != PMIX_SUCCESS || !value) {
        set_error("PMIx_Get(%s): %s", key, describe(status));
        return -1;
    }
    int rc = value_number(value, number);
    if (rc != 0)
        set_error("PMIx_Get(%s): not an integer (type %d)", key, (int)value->type);
    release(value);
    return rc;
}

int resmpi_pmix_init(uint32_t *rank, uint32_t *size, uint32_t *local_rank, uint32_t *local_size,
                     char *namespace_out, size_t namespace_bytes)
{
    if (load() != 0)
        return -1;
    pmix_status_t status = api.init(&me, NULL, 0);
    if (status != PMIX_SUCCESS) {
        set_error("PMIx_Init: %s", describe(status));
        return -1;
    }
    uint64_t job_size, local_number, local_count;
    if (get_number(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE, &job_size) != 0)
        return -1;
    if (get_number(me.rank, PMIX_LOCAL_RANK, &local_number) != 0)
        local_number = 0;
    if (get_number(PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE, &local_count) != 0)
        local_count = 1;
    *rank = me.rank;
    *size = (uint32_t)job_size;
    *local_rank = (uint32_t)local_number;
    *local_size = (uint32_t)local_count;
    snprintf(namespace_out, namespace_bytes, "%s", me.nspace);
    return 0;
}

int resmpi_pmix_put(const char *key, const char *text)
{
    pmix_value_t value;
    memset(&value, 0, sizeof value);
    value.type = PMIX_STRING;
    value.data.string = (char *)text;
    pmix_status_t status = api.put(PMIX_GLOBAL, key, &value);
    if (status != PMIX_SUCCESS) {
        set_error("PMIx_Put(%s): %s", key, describe(status));
        return -1;
    }
    return 0;
}

/* Commit what was put, and wait for every process of the job, with the data
 * collected (so gets after it are local). */
int resmpi_pmix_fence(void)
{
    pmix_status_t status = api.commit();
    if (status != PMIX_SUCCESS) {
        set_error("PMIx_Commit: %s", describe(status));
        return -1;
    }
    pmix_info_t info;
    memset(&info, 0, sizeof info);
    snprintf(info.key, sizeof info.key, "%s", PMIX_COLLECT_DATA);
    info.value.type = PMIX_BOOL;
    info.value.data.flag = true;
    status = api.fence(NULL, 0, &info, 1);
    if (status != PMIX_SUCCESS) {
        set_error("PMIx_Fence: %s", describe(status));
        return -1;
    }
    return 0;
}

/* 0: found, copied into out (NUL-terminated); 1: no such key; -1: error
 * (including a value longer than out_bytes - 1). */
int resmpi_pmix_get(uint32_t rank, const char *key, char *out, size_t out_bytes)
{
    pmix_proc_t proc = me;
    proc.rank = rank;
    pmix_value_t *value = NULL;
    pmix_status_t status = api.get(&proc, key, NULL, 0, &value);
    if (status == PMIX_ERR_NOT_FOUND)
        return 1;
    if (status != PMIX_SUCCESS || !value) {
        set_error("PMIx_Get(%s of rank %u): %s", key, rank, describe(status));
        return -1;
    }
    int rc = 0;
    if (value->type != PMIX_STRING || !value->data.string) {
        set_error("PMIx_Get(%s of rank %u): not a string (type %d)", key, rank, (int)value->type);
        rc = -1;
    } else if (strlen(value->data.string) >= out_bytes) {
        set_error("PMIx_Get(%s of rank %u): value longer than %zu bytes", key, rank, out_bytes - 1);
        rc = -1;
    } else {
        strcpy(out, value->data.string);
    }
    release(value);
    return rc;
}

void resmpi_pmix_abort(int status, const char *message)
{
    if (api.abort)
        api.abort(status, message, NULL, 0);
}

int resmpi_pmix_finalize(void)
{
    pmix_status_t status = api.finalize(NULL, 0);
    if (status != PMIX_SUCCESS) {
        set_error("PMIx_Finalize: %s", describe(status));
        return -1;
    }
    return 0;
}

#else /* built without pmix.h */

int resmpi_pmix_init(uint32_t *rank, uint32_t *size, uint32_t *local_rank, uint32_t *local_size,
                     char *namespace_out, size_t namespace_bytes)
{
    (void)rank, (void)size, (void)local_rank, (void)local_size, (void)namespace_out,
        (void)namespace_bytes;
    set_error("this resmpi was built without pmix.h (Debian: libpmix-dev), so it has no PMIx "
              "client; under Slurm use 'srun --mpi=pmi2'");
    return -1;
}
int resmpi_pmix_put(const char *key, const char *text) { (void)key, (void)text; return -1; }
int resmpi_pmix_fence(void) { return -1; }
int resmpi_pmix_get(uint32_t rank, const char *key, char *out, size_t out_bytes)
{
    (void)rank, (void)key, (void)out, (void)out_bytes;
    return -1;
}
void resmpi_pmix_abort(int status, const char *message) { (void)status, (void)message; }
int resmpi_pmix_finalize(void) { return -1; }
#endif
