/* HDF5 over MPI-IO (issue 14 item 3): Debian's HDF5 built for MPICH
 * (libhdf5-mpich-dev), compiled with mpicc.mpich and run under the MPI under
 * test (resmpi's mpiexec puts its libmpi.so.12 first).  Every rank writes
 * its rows of a 2-D dataset and an attribute collectively
 * (H5Pset_fapl_mpio, H5FD_MPIO_COLLECTIVE), the file is closed, reopened,
 * and every rank reads its right neighbour's rows collectively and a strided
 * column block independently, checking every value.
 *
 *   io_hdf5 FILE [ROWS_PER_RANK]
 *
 * Environment hints reach the file through the MPI library itself (e.g.
 * RESMPI_IO_REPLICATION_FACTOR under resmpi). */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define COLS 1000

static int rank, size;

#define H5_OK(expr)                                                            \
    do {                                                                       \
        if ((expr) < 0) {                                                      \
            fprintf(stderr, "FAIL rank %d: %s failed (line %d)\n", rank, #expr, __LINE__); \
            MPI_Abort(MPI_COMM_WORLD, 3);                                      \
        }                                                                      \
    } while (0)

static double value(long row, long col) { return (double)row * 1.0e4 + (double)col + 0.25; }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
        fprintf(stderr, "usage: io_hdf5 FILE [ROWS_PER_RANK]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *name = argv[1];
    long rows = argc > 2 ? atol(argv[2]) : 37;
    hsize_t dims[2] = {(hsize_t)(rows * size), COLS};
    double *buf = malloc(sizeof(double) * (size_t)rows * COLS);
    for (long r = 0; r < rows; r++)
        for (long c = 0; c < COLS; c++) buf[r * COLS + c] = value(rank * rows + r, c);

    /* write */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5_OK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL));
    hid_t file = H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5_OK(file);
    hid_t space = H5Screate_simple(2, dims, NULL);
    hid_t dset = H5Dcreate2(file, "matrix", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5_OK(dset);
    hsize_t start[2] = {(hsize_t)(rank * rows), 0}, count[2] = {(hsize_t)rows, COLS};
    H5_OK(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL));
    hid_t memspace = H5Screate_simple(2, count, NULL);
    hid_t xfer = H5Pcreate(H5P_DATASET_XFER);
    H5_OK(H5Pset_dxpl_mpio(xfer, H5FD_MPIO_COLLECTIVE));
    H5_OK(H5Dwrite(dset, H5T_NATIVE_DOUBLE, memspace, space, xfer, buf));
    hid_t aspace = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(dset, "ranks", H5T_NATIVE_INT, aspace, H5P_DEFAULT, H5P_DEFAULT);
    H5_OK(H5Awrite(attr, H5T_NATIVE_INT, &size));
    H5_OK(H5Aclose(attr));
    H5_OK(H5Sclose(aspace));
    H5_OK(H5Sclose(memspace));
    H5_OK(H5Sclose(space));
    H5_OK(H5Dclose(dset));
    H5_OK(H5Fclose(file));

    /* read back: the right neighbour's rows, collectively */
    file = H5Fopen(name, H5F_ACC_RDONLY, fapl);
    H5_OK(file);
    dset = H5Dopen2(file, "matrix", H5P_DEFAULT);
    H5_OK(dset);
    space = H5Dget_space(dset);
    hsize_t got[2];
    H5_OK(H5Sget_simple_extent_dims(space, got, NULL));
    if (got[0] != dims[0] || got[1] != dims[1]) {
        fprintf(stderr, "FAIL rank %d: dims %llu x %llu\n", rank, (unsigned long long)got[0],
                (unsigned long long)got[1]);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    int right = (rank + 1) % size, ranks_attr = -1;
    attr = H5Aopen(dset, "ranks", H5P_DEFAULT);
    H5_OK(H5Aread(attr, H5T_NATIVE_INT, &ranks_attr));
    H5_OK(H5Aclose(attr));
    long bad = 0;
    if (ranks_attr != size) bad++;
    start[0] = (hsize_t)(right * rows);
    H5_OK(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL));
    memspace = H5Screate_simple(2, count, NULL);
    for (long i = 0; i < rows * COLS; i++) buf[i] = -1;
    H5_OK(H5Dread(dset, H5T_NATIVE_DOUBLE, memspace, space, xfer, buf));
    for (long r = 0; r < rows; r++)
        for (long c = 0; c < COLS; c++)
            if (buf[r * COLS + c] != value(right * rows + r, c) && bad++ < 5)
                fprintf(stderr, "FAIL rank %d: [%ld][%ld] = %g, expected %g\n", rank, right * rows + r, c,
                        buf[r * COLS + c], value(right * rows + r, c));
    H5_OK(H5Sclose(memspace));
    /* independent, strided: every 7th row of the whole dataset, columns 10..19 */
    hsize_t stride[2] = {7, 1}, blocks[2] = {(dims[0] + 6) / 7, 10}, first[2] = {0, 10};
    H5_OK(H5Sselect_hyperslab(space, H5S_SELECT_SET, first, stride, blocks, NULL));
    memspace = H5Screate_simple(2, blocks, NULL);
    hid_t independent = H5Pcreate(H5P_DATASET_XFER);
    H5_OK(H5Pset_dxpl_mpio(independent, H5FD_MPIO_INDEPENDENT));
    H5_OK(H5Dread(dset, H5T_NATIVE_DOUBLE, memspace, space, independent, buf));
    for (hsize_t r = 0; r < blocks[0]; r++)
        for (hsize_t c = 0; c < 10; c++)
            if (buf[r * 10 + c] != value((long)(r * 7), (long)(c + 10)) && bad++ < 5)
                fprintf(stderr, "FAIL rank %d: strided [%llu][%llu] = %g\n", rank,
                        (unsigned long long)(r * 7), (unsigned long long)(c + 10), buf[r * 10 + c]);
    H5_OK(H5Pclose(independent));
    H5_OK(H5Sclose(memspace));
    H5_OK(H5Sclose(space));
    H5_OK(H5Dclose(dset));
    H5_OK(H5Fclose(file));
    H5_OK(H5Pclose(xfer));
    H5_OK(H5Pclose(fapl));
    long total = 0;
    MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    free(buf);
    if (total != 0) {
        if (rank == 0) fprintf(stderr, "FAIL: %ld wrong values\n", total);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (rank == 0) printf("%s: %llu x %llu doubles written and read back\nOK\n", name,
                          (unsigned long long)dims[0], (unsigned long long)dims[1]);
    MPI_Finalize();
    return 0;
}
