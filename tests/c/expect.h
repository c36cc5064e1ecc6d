/* EXPECT_CLASS(call, class): the call fails with that MPI error class
 * (under MPI_ERRORS_RETURN).  Shared by the group/comm/topo/attr/info tests. */
#ifndef RESMPI_TEST_EXPECT_H
#define RESMPI_TEST_EXPECT_H
#include "common.h"

#define EXPECT_CLASS(call, cls)                                                \
    do {                                                                       \
        int erc_ = (call), ecls_ = -1;                                         \
        CHECK(erc_ != MPI_SUCCESS, "%s succeeded, expected class %d", #call, (cls)); \
        MPI_OK(MPI_Error_class(erc_, &ecls_));                                 \
        CHECK(ecls_ == (cls), "%s: error class %d, expected %d", #call, ecls_, (cls)); \
    } while (0)

static inline void errors_return(void) {
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
}
#endif
