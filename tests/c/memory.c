/* MPI_Alloc_mem / MPI_Free_mem: usable memory of the size asked for, freed
 * again; a negative size is MPI_ERR_ARG under MPI_ERRORS_RETURN. */
#include "common.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    for (MPI_Aint size = 0; size <= (1 << 20); size = size ? size * 8 : 1) {
        unsigned char *memory = NULL;
        CHECK(MPI_Alloc_mem(size, MPI_INFO_NULL, &memory) == MPI_SUCCESS, "alloc %ld", (long)size);
        CHECK(memory != NULL || size == 0, "NULL for %ld bytes", (long)size);
        for (MPI_Aint i = 0; i < size; i++) memory[i] = (unsigned char)i;
        for (MPI_Aint i = 0; i < size; i++) CHECK(memory[i] == (unsigned char)i, "byte %ld", (long)i);
        CHECK(MPI_Free_mem(memory) == MPI_SUCCESS, "free %ld", (long)size);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    void *memory = NULL;
    int code = MPI_Alloc_mem(-5, MPI_INFO_NULL, &memory);
    int class_ = MPI_SUCCESS;
    MPI_Error_class(code, &class_);
    CHECK(class_ == MPI_ERR_ARG || class_ == MPI_ERR_NO_MEM, "negative size gave class %d", class_);
    if (g_rank == 0) printf("OK\n");
    MPI_Finalize();
    return 0;
}
