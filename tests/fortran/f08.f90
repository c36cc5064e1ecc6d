! `use mpi_f08`: handle types and their == / /=, TYPE(MPI_Status) fields,
! OPTIONAL ierror (left out and given), point-to-point, collectives with
! MPI_IN_PLACE, a Fortran 2008 user operation (TYPE(C_PTR) arguments),
! strings, topologies, attributes and MPI_ERRORS_RETURN.  Rank 0 prints OK.
module f08_ops
  use, intrinsic :: iso_c_binding
  use mpi_f08
  implicit none
contains
  subroutine max_abs(invec, inoutvec, len, datatype)
    type(c_ptr), value :: invec, inoutvec
    integer :: len
    type(MPI_Datatype) :: datatype
    integer, pointer :: a(:), b(:)
    integer :: i
    call c_f_pointer(invec, a, [len])
    call c_f_pointer(inoutvec, b, [len])
    do i = 1, len
      b(i) = max(abs(a(i)), abs(b(i)))
    end do
  end subroutine max_abs
end module f08_ops

program f08
  use mpi_f08
  use f08_ops
  implicit none
  integer :: ierr, rank, nprocs, next, prev, nbad, total, x, y, idx, i, length, cls
  integer :: arr(4), dims(2), coords(2)
  type(MPI_Status) :: status, statuses(2)
  type(MPI_Request) :: reqs(2)
  type(MPI_Comm) :: dup, split, cart
  type(MPI_Op) :: op
  type(MPI_Datatype) :: vec
  integer(kind=MPI_ADDRESS_KIND) :: tag_ub
  logical :: flag
  character(len=MPI_MAX_OBJECT_NAME) :: name
  double precision :: t0
  nbad = 0
  call MPI_Init()
  t0 = MPI_Wtime()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call check(ierr == MPI_SUCCESS, 'ierror given')
  next = mod(rank + 1, nprocs)
  prev = mod(rank + nprocs - 1, nprocs)

  call MPI_Irecv(y, 1, MPI_INTEGER, prev, 3, MPI_COMM_WORLD, reqs(1))
  call MPI_Send(rank * 7, 1, MPI_INTEGER, next, 3, MPI_COMM_WORLD)
  call MPI_Wait(reqs(1), status)
  call check(y == prev * 7, 'send/irecv data')
  call check(status%MPI_SOURCE == prev .and. status%MPI_TAG == 3, 'status fields')
  call check(reqs(1) == MPI_REQUEST_NULL, 'request == MPI_REQUEST_NULL')
  call MPI_Get_count(status, MPI_INTEGER, x)
  call check(x == 1, 'get_count')

  call MPI_Irecv(y, 1, MPI_INTEGER, prev, 4, MPI_COMM_WORLD, reqs(1))
  call MPI_Isend(rank, 1, MPI_INTEGER, next, 4, MPI_COMM_WORLD, reqs(2))
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE)
  call check(y == prev .and. all(reqs == MPI_REQUEST_NULL), 'waitall')
  call MPI_Irecv(y, 1, MPI_INTEGER, prev, 5, MPI_COMM_WORLD, reqs(2))
  call MPI_Send(rank, 1, MPI_INTEGER, next, 5, MPI_COMM_WORLD)
  call MPI_Waitany(2, reqs, idx, MPI_STATUS_IGNORE)
  call check(idx == 2, 'waitany 1-based')

  arr = [1, rank, -rank, 2]
  call MPI_Allreduce(MPI_IN_PLACE, arr, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call check(all(arr == [nprocs, nprocs * (nprocs - 1) / 2, -nprocs * (nprocs - 1) / 2, &
                         2 * nprocs]), 'allreduce in place')
  x = -1
  if (rank == 0) x = 99
  call MPI_Bcast(x, 1, MPI_INTEGER, 0, MPI_COMM_WORLD)
  call check(x == 99, 'bcast')
  call MPI_Op_create(max_abs, .true., op)
  call MPI_Allreduce(-rank, x, 1, MPI_INTEGER, op, MPI_COMM_WORLD)
  call check(x == nprocs - 1, 'f08 user op')
  call MPI_Op_free(op)
  call check(op == MPI_OP_NULL, 'op_free')

  call MPI_Comm_dup(MPI_COMM_WORLD, dup)
  call check(dup /= MPI_COMM_WORLD, 'dup is a new handle')
  call MPI_Comm_compare(dup, MPI_COMM_WORLD, x)
  call check(x == MPI_CONGRUENT, 'compare')
  call MPI_Comm_set_name(dup, 'f08 comm')
  call MPI_Comm_get_name(dup, name, length)
  call check(name == 'f08 comm' .and. length == 8, 'names')
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, split)
  call MPI_Comm_size(split, x)
  call check(x == (nprocs + 1 - mod(rank, 2)) / 2, 'split')
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, tag_ub, flag)
  call check(flag .and. tag_ub >= 32767, 'MPI_TAG_UB')
  call MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN)
  call MPI_Send(x, 1, MPI_INTEGER, nprocs, 0, dup, ierr)
  call MPI_Error_class(ierr, cls)
  call check(cls == MPI_ERR_RANK, 'MPI_ERRORS_RETURN code')

  dims = 0
  call MPI_Dims_create(nprocs, 2, dims)
  call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, [.true., .true.], .false., cart)
  call MPI_Cart_coords(cart, rank, 2, coords)
  call check(coords(1) * dims(2) + coords(2) == rank, 'cart coords')
  call MPI_Comm_free(cart)

  call MPI_Type_vector(2, 1, 2, MPI_INTEGER, vec)
  call MPI_Type_commit(vec)
  call MPI_Type_size(vec, x)
  call check(x == 8, 'type_vector size')
  arr = [10, 20, 30, 40]
  call MPI_Sendrecv(arr, 1, vec, 0, 6, dims, 2, MPI_INTEGER, 0, 6, MPI_COMM_SELF, status)
  call check(all(dims == [10, 30]) .and. status%MPI_TAG == 6, 'vector sendrecv')
  call MPI_Type_free(vec)
  call check(vec == MPI_DATATYPE_NULL, 'type_free')

  call check(MPI_Wtime() >= t0 .and. MPI_Wtick() > 0, 'wtime')
  call MPI_Sizeof(t0, x)
  call MPI_Sizeof(arr, y, ierr)
  call check(x == 8 .and. y == 4 .and. ierr == MPI_SUCCESS, 'MPI_Sizeof')
  call MPI_Comm_free(split)
  call MPI_Comm_free(dup)
  call MPI_Allreduce(nbad, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (rank == 0 .and. total == 0) print '(A)', 'OK'
  call MPI_Finalize()
contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      nbad = nbad + 1
      print '(A,I0,2A)', 'FAIL rank ', rank, ': ', what
    end if
  end subroutine check
end program f08
