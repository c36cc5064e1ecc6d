/* resmpi's veloc.h: VeloC's memory-based checkpoint API (the declarations
 * and constants of VeloC's include/veloc.h and include/veloc/defs.h),
 * implemented in resmpi's libmpi: checkpoints are per rank, written
 * synchronously and atomically with a CRC32C, into mpiexec's --ckpt-dir
 * or the cfg file's persistent/scratch directory.  See docs/user-guide.md
 * ("Checkpoints: the VeloC API"). */
#ifndef __VELOC_H
#define __VELOC_H

#include <string.h>
#include <mpi.h>

#define VELOC_SUCCESS (0)
#define VELOC_FAILURE (-1)

#define VELOC_MAX_NAME (1024)

#define VELOC_RECOVER_ALL (0)
#define VELOC_RECOVER_SOME (1)
#define VELOC_RECOVER_REST (2)

#define VELOC_CKPT_ALL (0)
#define VELOC_CKPT_SOME (1)
#define VELOC_CKPT_REST (2)

#define VELOC_OBSERVE_CKPT_END (0)

#ifdef __cplusplus
extern "C" {
#endif

/* Init / Finalize */
int VELOC_Init(MPI_Comm comm, const char *cfg_file);
int VELOC_Init_single(unsigned int id, const char *cfg_file);
int VELOC_Finalize(int cleanup);

/* Memory registration */
int VELOC_Mem_protect(int id, void *ptr, size_t count, size_t base_size);
/* Named regions: declared as in VeloC; resmpi returns VELOC_FAILURE. */
int VELOC_Region_protect(int id, void *ptr, size_t count, size_t base_size, const char *name);
int VELOC_Mem_unprotect(int id);
int VELOC_Mem_clear();
int VELOC_Region_unprotect(int id, const char *name);
int VELOC_Region_clear(const char *name);

/* File registration (inside a checkpoint or restart phase) */
int VELOC_Route_file(const char *original, char *routed);

/* Cleanup: remove this rank's checkpoints of name */
int VELOC_Cleanup(const char *name);

/* Checkpoint */
int VELOC_Checkpoint_begin(const char *name, int version);
int VELOC_Checkpoint_selective(int mode, int *ids, int id_count);
int VELOC_Checkpoint_mem();
int VELOC_Checkpoint_end(int success);
int VELOC_Checkpoint_wait();
int VELOC_Checkpoint_finished();
int VELOC_Checkpoint(const char *name, int version);

/* Restart */
int VELOC_Restart_test(const char *name, int version);
int VELOC_Restart_begin(const char *name, int version);
int VELOC_Recover_selective(int mode, int *ids, int id_count);
int VELOC_Recover_size(int id);
int VELOC_Recover_mem();
int VELOC_Restart_end(int success);
int VELOC_Restart(const char *name, int version);

#ifdef __cplusplus
}
#endif

#endif /* __VELOC_H */
