/* MPI_Is_thread_main: true on the thread that initialized MPI, false on
 * another one (called while the main thread waits, as SERIALIZED allows). */
#include "common.h"
#include <pthread.h>

static void *ask(void *flag) {
    MPI_Is_thread_main((int *)flag);
    return NULL;
}

int main(int argc, char **argv) {
    int provided = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    int main_flag = -1, other_flag = -1;
    MPI_Is_thread_main(&main_flag);
    CHECK(main_flag == 1, "main thread: %d", main_flag);
    if (provided >= MPI_THREAD_SERIALIZED) {
        pthread_t thread;
        CHECK(pthread_create(&thread, NULL, ask, &other_flag) == 0, "pthread_create");
        pthread_join(thread, NULL);
        CHECK(other_flag == 0, "other thread: %d", other_flag);
    }
    if (g_rank == 0) printf("OK\n");
    MPI_Finalize();
    return 0;
}
