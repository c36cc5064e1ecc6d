/* MPI_Comm_split_type beyond MPI_COMM_TYPE_SHARED (MPI-4):
 * MPI_COMM_TYPE_HW_GUIDED with mpi_hw_resource_type = mpi_shared_memory is
 * the shared-memory split; without the hint, or with another key, it is
 * MPI_COMM_NULL; MPI_COMM_TYPE_HW_UNGUIDED gives a strictly smaller
 * communicator (naming its resource in the info) or MPI_COMM_NULL; an
 * unknown split type is an error. */
#include "expect.h"

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    MPI_Comm shared, guided, unguided, none;
    int shared_size = -1, guided_size = -2, flag = 0;
    MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared));
    MPI_OK(MPI_Comm_size(shared, &shared_size));

    MPI_Info info;
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "mpi_hw_resource_type", "mpi_shared_memory"));
    MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, info, &guided));
    CHECK(guided != MPI_COMM_NULL, "HW_GUIDED mpi_shared_memory gave MPI_COMM_NULL");
    MPI_OK(MPI_Comm_size(guided, &guided_size));
    CHECK(guided_size == shared_size, "HW_GUIDED size %d, shared size %d", guided_size, shared_size);
    MPI_OK(MPI_Comm_free(&guided));
    MPI_OK(MPI_Info_free(&info));

    MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, MPI_INFO_NULL, &none));
    CHECK(none == MPI_COMM_NULL, "HW_GUIDED without a hint did not give MPI_COMM_NULL");
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "shmem_topo", "machine"));
    MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, info, &none));
    CHECK(none == MPI_COMM_NULL, "HW_GUIDED with the wrong key did not give MPI_COMM_NULL");
    MPI_OK(MPI_Info_free(&info));

    int world_size;
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_UNGUIDED, 0, info, &unguided));
    if (unguided != MPI_COMM_NULL) {
        int size = -1;
        char resource[MPI_MAX_INFO_VAL + 1] = "";
        MPI_OK(MPI_Comm_size(unguided, &size));
        CHECK(size < world_size, "HW_UNGUIDED gave %d of %d processes", size, world_size);
        MPI_OK(MPI_Info_get(info, "mpi_hw_resource_type", MPI_MAX_INFO_VAL, resource, &flag));
        CHECK(flag && resource[0], "HW_UNGUIDED did not name its resource in the info");
        MPI_OK(MPI_Comm_free(&unguided));
    }
    MPI_OK(MPI_Info_free(&info));

    /* MPI_UNDEFINED mixed with a split type in one call. */
    for (int root = 0; root < world_size; root++) {
        MPI_Comm mine;
        int type = g_rank == root ? MPI_COMM_TYPE_SHARED : MPI_UNDEFINED, size = -1;
        MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, type, 0, MPI_INFO_NULL, &mine));
        if (g_rank == root) {
            CHECK(mine != MPI_COMM_NULL, "the only joining process got MPI_COMM_NULL");
            MPI_OK(MPI_Comm_size(mine, &size));
            CHECK(size == 1, "the only joining process got %d processes", size);
            MPI_OK(MPI_Comm_free(&mine));
        } else {
            CHECK(mine == MPI_COMM_NULL, "MPI_UNDEFINED gave a communicator");
        }
    }

    errors_return();
    CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, 12345, 0, MPI_INFO_NULL, &none) != MPI_SUCCESS,
          "split type 12345 accepted");
    MPI_OK(MPI_Comm_free(&shared));
    return test_finish();
}
