/* MPI-IO bandwidth: independent (each rank its own contiguous region, in
 * 1 MiB calls) and collective (an interleaved view of 64 KiB blocks, one
 * write_all/read_all), write then read, aggregate MB/s over all ranks,
 * files in DIR.  With a replication factor R >= 2 (resmpi only; another
 * MPI ignores the hints) it also reads after losing a replica target and
 * after losing the primary copy (read-repair rebuilds it while reading).
 *
 *   io DIR MIB_PER_RANK R [TARGET...]
 *
 * IO_BENCH_HINTS="key=value,..." adds hints (cb_nodes=2, romio_cb_write=...).
 * Prints one line per measurement: "<what> <MB/s>".  The page cache is not
 * dropped: this measures what the library adds (copies, checksums, system
 * calls), not the disk. */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (1 << 20)
#define BLOCK (64 << 10)

static int rank, size;

static MPI_Info hints(int factor, int targets, char **target) {
    MPI_Info info;
    char text[16], list[4096] = "";
    MPI_Info_create(&info);
    snprintf(text, sizeof text, "%d", factor);
    MPI_Info_set(info, "replication_factor", text);
    if (factor > 1) {
        for (int i = 0; i < targets; i++) {
            if (i) strncat(list, ",", sizeof list - strlen(list) - 1);
            strncat(list, target[i], sizeof list - strlen(list) - 1);
        }
        MPI_Info_set(info, "resmpi_replica_targets", list);
    }
    /* IO_BENCH_HINTS="key=value,key=value": more hints (cb_nodes, ...) */
    const char *extra = getenv("IO_BENCH_HINTS");
    if (extra && *extra) {
        char copy[4096], *item, *rest;
        snprintf(copy, sizeof copy, "%s", extra);
        for (item = strtok_r(copy, ",", &rest); item; item = strtok_r(NULL, ",", &rest)) {
            char *equals = strchr(item, '=');
            if (!equals) continue;
            *equals = 0;
            MPI_Info_set(info, item, equals + 1);
        }
    }
    return info;
}

static double report(const char *what, double seconds, double bytes) {
    double slowest;
    MPI_Reduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%s %.1f\n", what, bytes * size / slowest / 1e6);
    return slowest;
}

static void check(const unsigned char *buf, size_t n, int seed) {
    for (size_t i = 0; i < n; i += 4093)
        if (buf[i] != (unsigned char)(seed + i * 7)) {
            fprintf(stderr, "io bench: rank %d: wrong byte at %zu\n", rank, i);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
}

static void fill(unsigned char *buf, size_t n, int seed) {
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(seed + i * 7);
}

/* Independent contiguous I/O of `bytes` per rank, in 1 MiB calls. */
static void independent(const char *path, MPI_Info info, size_t bytes, unsigned char *buf, int write,
                        const char *what) {
    MPI_File fh;
    MPI_Status status;
    int amode = write ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY;
    MPI_File_open(MPI_COMM_WORLD, path, amode, info, &fh);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (size_t done = 0; done < bytes; done += CHUNK) {
        MPI_Offset at = (MPI_Offset)rank * (MPI_Offset)bytes + (MPI_Offset)done;
        int rc = write ? MPI_File_write_at(fh, at, buf + done, CHUNK, MPI_BYTE, &status)
                       : MPI_File_read_at(fh, at, buf + done, CHUNK, MPI_BYTE, &status);
        if (rc != MPI_SUCCESS) {
            fprintf(stderr, "io bench: %s failed\n", what);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    MPI_File_close(&fh);
    report(what, MPI_Wtime() - t0, (double)bytes);
    if (!write) check(buf, bytes, rank);
}

/* Collective I/O through an interleaved view: rank r owns every size-th
 * 64 KiB block. */
static void collective(const char *path, MPI_Info info, size_t bytes, unsigned char *buf, int write,
                       const char *what) {
    MPI_File fh;
    MPI_Status status;
    MPI_Datatype block, filetype;
    MPI_Type_contiguous(BLOCK, MPI_BYTE, &block);
    MPI_Type_create_resized(block, 0, (MPI_Aint)BLOCK * size, &filetype);
    MPI_Type_commit(&filetype);
    int amode = write ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY;
    MPI_File_open(MPI_COMM_WORLD, path, amode, info, &fh);
    MPI_File_set_view(fh, (MPI_Offset)rank * BLOCK, MPI_BYTE, filetype, "native", MPI_INFO_NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    int rc = write ? MPI_File_write_all(fh, buf, (int)bytes, MPI_BYTE, &status)
                   : MPI_File_read_all(fh, buf, (int)bytes, MPI_BYTE, &status);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "io bench: %s failed\n", what);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_File_close(&fh);
    report(what, MPI_Wtime() - t0, (double)bytes);
    if (!write) check(buf, bytes, rank);
    MPI_Type_free(&filetype);
    MPI_Type_free(&block);
}

/* Remove the replica data a target holds for `name` (the one file there
 * whose name starts with it and has no .crc/.meta suffix). */
static void lose_replica(const char *target, const char *name) {
    DIR *dir = opendir(target);
    struct dirent *entry;
    char path[4096];
    while (dir && (entry = readdir(dir))) {
        size_t n = strlen(entry->d_name);
        if (strncmp(entry->d_name, name, strlen(name)) || entry->d_name[strlen(name)] != '.') continue;
        if (n > 4 && (!strcmp(entry->d_name + n - 4, ".crc") || !strcmp(entry->d_name + n - 5, ".meta")))
            continue;
        snprintf(path, sizeof path, "%s/%s", target, entry->d_name);
        unlink(path);
    }
    if (dir) closedir(dir);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 4) {
        if (rank == 0) fprintf(stderr, "usage: io DIR MIB_PER_RANK R [TARGET...]\n");
        MPI_Finalize();
        return 2;
    }
    const char *dir = argv[1];
    size_t bytes = (size_t)atoi(argv[2]) << 20;
    int factor = atoi(argv[3]);
    MPI_Info info = hints(factor, argc - 4, argv + 4);
    unsigned char *buf = malloc(bytes);
    char path[4096], other[4096];
    snprintf(path, sizeof path, "%s/independent.dat", dir);
    snprintf(other, sizeof other, "%s/collective.dat", dir);
    if (rank == 0) {
        MPI_File_delete(path, MPI_INFO_NULL);
        MPI_File_delete(other, MPI_INFO_NULL);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    fill(buf, bytes, rank);
    independent(path, info, bytes, buf, 1, "independent_write");
    memset(buf, 0, bytes);
    independent(path, info, bytes, buf, 0, "independent_read");
    fill(buf, bytes, rank);
    collective(other, info, bytes, buf, 1, "collective_write");
    memset(buf, 0, bytes);
    collective(other, info, bytes, buf, 0, "collective_read");
    if (factor > 1 && argc > 4) {
        if (rank == 0) lose_replica(argv[4], "independent.dat");
        MPI_Barrier(MPI_COMM_WORLD);
        memset(buf, 0, bytes);
        independent(path, info, bytes, buf, 0, "independent_read_target_lost");
        /* Writing it again brings the lost replica back (a write open
         * recreates missing copies); then lose the primary instead. */
        fill(buf, bytes, rank);
        independent(path, info, bytes, buf, 1, "independent_rewrite_after_loss");
        if (rank == 0) {
            char checksums[4096];
            snprintf(checksums, sizeof checksums, "%s/.independent.dat.resmpi-crc", dir);
            unlink(path);
            unlink(checksums);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        memset(buf, 0, bytes);
        independent(path, info, bytes, buf, 0, "independent_read_primary_lost");
    }
    if (rank == 0) {
        MPI_File_delete(path, MPI_INFO_NULL);
        MPI_File_delete(other, MPI_INFO_NULL);
    }
    MPI_Info_free(&info);
    free(buf);
    MPI_Finalize();
    return 0;
}
