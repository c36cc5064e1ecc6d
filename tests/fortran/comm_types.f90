! Communicators, groups, topologies, datatypes, errors, info and attributes
! through `use mpi`, with MPI_ERRORS_RETURN error codes and Fortran keyval
! callbacks called by the C side.  Rank 0 prints OK when all checks passed.
module attr_callbacks
  implicit none
  integer :: deletes = 0
contains
  ! copies the attribute value plus one, so the test can see the copy ran
  subroutine copy_plus_one(oldcomm, keyval, extra_state, value_in, value_out, flag, ierror)
    use mpi
    integer :: oldcomm, keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: extra_state, value_in, value_out
    logical :: flag
    value_out = value_in + 1 + extra_state
    flag = .true.
    ierror = MPI_SUCCESS
  end subroutine copy_plus_one
  subroutine count_delete(comm, keyval, value, extra_state, ierror)
    use mpi
    integer :: comm, keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: value, extra_state
    deletes = deletes + 1
    ierror = MPI_SUCCESS
  end subroutine count_delete
  subroutine remember_error(comm, code)
    integer :: comm, code
    deletes = deletes + 1000
  end subroutine remember_error
end module attr_callbacks

program comm_types
  use mpi
  use attr_callbacks
  implicit none
  integer :: ierr, rank, nprocs, nbad, total, i, n, res, color
  integer :: dup, split, newcomm, world_group, group, sub_group, srank, ssize
  integer :: cart, sub, dims(2), coords(2), src, dst, ndims, nnodes, nedges, nneighbors
  integer :: graph, index(4), edges(8), neighbors(4)
  logical :: periods(2), remain(2), flag
  integer :: ranks(4), tranks(4), vec, idx, st, dtsize, blocklens(2), types(2), keyval, eh
  integer(kind=MPI_ADDRESS_KIND) :: lb, extent, addr(2), value, disps(2)
  integer :: ibuf(12), ibuf2(12), status(MPI_STATUS_SIZE), info, nkeys, length, cls
  character(len=MPI_MAX_ERROR_STRING) :: msg
  character(len=MPI_MAX_INFO_VAL) :: val
  character(len=MPI_MAX_OBJECT_NAME) :: name
  double precision :: dpart
  nbad = 0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  n = nprocs

  ! dup / compare / split / create / free
  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  call MPI_Comm_compare(MPI_COMM_WORLD, dup, res, ierr)
  call check(res == MPI_CONGRUENT, 'compare dup congruent')
  call MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, res, ierr)
  call check(res == MPI_IDENT, 'compare ident')
  color = mod(rank, 2)
  call MPI_Comm_split(MPI_COMM_WORLD, color, -rank, split, ierr)
  call MPI_Comm_rank(split, srank, ierr)
  call MPI_Comm_size(split, ssize, ierr)
  call check(ssize == (n + 1 - color) / 2, 'split size')
  call check(srank == ssize - 1 - rank / 2, 'split key orders ranks')
  call MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, 0, newcomm, ierr)
  call check(newcomm == MPI_COMM_NULL, 'split undefined')
  call MPI_Comm_set_name(dup, 'fortran dup   ', ierr)
  call MPI_Comm_get_name(dup, name, length, ierr)
  call check(name == 'fortran dup' .and. length == 11, 'comm name round trip')

  ! groups
  call MPI_Comm_group(MPI_COMM_WORLD, world_group, ierr)
  call MPI_Group_size(world_group, ssize, ierr)
  call check(ssize == n, 'group size')
  ranks(1) = n - 1
  call MPI_Group_incl(world_group, 1, ranks, group, ierr)
  call MPI_Group_rank(group, srank, ierr)
  if (rank == n - 1) then
    call check(srank == 0, 'group_incl rank')
  else
    call check(srank == MPI_UNDEFINED, 'group_incl undefined rank')
  end if
  call MPI_Group_excl(world_group, 1, ranks, sub_group, ierr)
  call MPI_Group_size(sub_group, ssize, ierr)
  call check(ssize == n - 1, 'group_excl size')
  ranks(1) = 0
  call MPI_Group_translate_ranks(group, 1, ranks, world_group, tranks, ierr)
  call check(tranks(1) == n - 1, 'translate_ranks')
  call MPI_Group_compare(world_group, world_group, res, ierr)
  call check(res == MPI_IDENT, 'group_compare')
  call MPI_Comm_create(MPI_COMM_WORLD, group, newcomm, ierr)
  if (rank == n - 1) then
    call MPI_Comm_size(newcomm, ssize, ierr)
    call check(ssize == 1, 'comm_create member')
    call MPI_Comm_free(newcomm, ierr)
  else
    call check(newcomm == MPI_COMM_NULL, 'comm_create non-member')
  end if
  call MPI_Group_free(group, ierr)
  call MPI_Group_free(sub_group, ierr)
  call MPI_Group_free(world_group, ierr)
  call check(world_group == MPI_GROUP_NULL, 'group_free')

  ! cartesian and graph topologies
  dims = 0
  call MPI_Dims_create(n, 2, dims, ierr)
  call check(dims(1) * dims(2) == n .and. dims(1) >= dims(2), 'dims_create')
  periods = [.true., .false.]
  call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, .false., cart, ierr)
  call MPI_Cart_coords(cart, rank, 2, coords, ierr)
  call check(coords(1) == rank / dims(2) .and. coords(2) == mod(rank, dims(2)), 'cart_coords')
  call MPI_Cart_rank(cart, coords, srank, ierr)
  call check(srank == rank, 'cart_rank')
  call MPI_Cart_shift(cart, 0, 1, src, dst, ierr)
  call check(dst == mod(coords(1) + 1, dims(1)) * dims(2) + coords(2), 'cart_shift periodic')
  call MPI_Cart_get(cart, 2, dims, periods, coords, ierr)
  call check(periods(1) .and. .not. periods(2), 'cart_get logical periods')
  call MPI_Cartdim_get(cart, ndims, ierr)
  call check(ndims == 2, 'cartdim_get')
  remain = [.false., .true.]
  call MPI_Cart_sub(cart, remain, sub, ierr)
  call MPI_Comm_size(sub, ssize, ierr)
  call check(ssize == dims(2), 'cart_sub')
  call MPI_Topo_test(cart, st, ierr)
  call check(st == MPI_CART, 'topo_test cart')
  call MPI_Comm_free(sub, ierr)
  call MPI_Comm_free(cart, ierr)
  if (n >= 2) then
    ! a ring of min(n, 4) nodes; other ranks are outside the graph
    nnodes = min(n, 4)
    do i = 1, nnodes
      index(i) = 2 * i
      edges(2 * i - 1) = mod(i, nnodes)
      edges(2 * i) = mod(i - 2 + nnodes, nnodes)
    end do
    call MPI_Graph_create(MPI_COMM_WORLD, nnodes, index, edges, .false., graph, ierr)
    if (rank < nnodes) then
      call MPI_Graphdims_get(graph, i, nedges, ierr)
      call check(i == nnodes .and. nedges == 2 * nnodes, 'graphdims_get')
      call MPI_Graph_neighbors_count(graph, rank, nneighbors, ierr)
      call MPI_Graph_neighbors(graph, rank, 4, neighbors, ierr)
      call check(nneighbors == 2 .and. neighbors(1) == mod(rank + 1, nnodes), 'graph_neighbors')
      call MPI_Comm_free(graph, ierr)
    else
      call check(graph == MPI_COMM_NULL, 'graph_create outsider')
    end if
  end if

  ! datatypes: vector, indexed, struct via absolute addresses and MPI_BOTTOM
  call MPI_Type_vector(3, 2, 4, MPI_INTEGER, vec, ierr)
  call MPI_Type_commit(vec, ierr)
  call MPI_Type_size(vec, dtsize, ierr)
  call check(dtsize == 24, 'vector size')
  call MPI_Type_get_extent(vec, lb, extent, ierr)
  call check(lb == 0 .and. extent == 40, 'vector extent')
  ibuf = [(i, i = 1, 12)]
  ibuf2 = 0
  call MPI_Sendrecv(ibuf, 1, vec, rank, 0, ibuf2, 6, MPI_INTEGER, rank, 0, MPI_COMM_WORLD, &
                    status, ierr)
  call check(all(ibuf2(1:6) == [1, 2, 5, 6, 9, 10]), 'vector send')
  call MPI_Type_free(vec, ierr)
  call check(vec == MPI_DATATYPE_NULL, 'type_free')
  blocklens = [1, 2]
  ranks(1:2) = [5, 0]
  call MPI_Type_indexed(2, blocklens, ranks, MPI_INTEGER, idx, ierr)
  call MPI_Type_commit(idx, ierr)
  ibuf2 = 0
  call MPI_Sendrecv(ibuf, 1, idx, rank, 1, ibuf2, 3, MPI_INTEGER, rank, 1, MPI_COMM_WORLD, &
                    status, ierr)
  call check(all(ibuf2(1:3) == [6, 1, 2]), 'indexed send')
  call MPI_Type_free(idx, ierr)
  dpart = 2.5d0
  call MPI_Get_address(ibuf(3), addr(1), ierr)
  call MPI_Get_address(dpart, addr(2), ierr)
  disps = addr
  blocklens = [2, 1]
  types = [MPI_INTEGER, MPI_DOUBLE_PRECISION]
  call MPI_Type_create_struct(2, blocklens, disps, types, st, ierr)
  call MPI_Type_commit(st, ierr)
  call MPI_Type_size(st, dtsize, ierr)
  call check(dtsize == 16, 'struct size')
  call MPI_Bcast(MPI_BOTTOM, 1, st, 0, MPI_COMM_WORLD, ierr)
  call check(ibuf(3) == 3 .and. dpart == 2.5d0, 'bcast from MPI_BOTTOM')
  call MPI_Type_free(st, ierr)
  call check(MPI_Aint_diff(addr(2), addr(1)) == addr(2) - addr(1), 'aint_diff')

  ! errors: MPI_ERRORS_RETURN gives codes, classes and strings
  call MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN, ierr)
  call MPI_Send(ibuf, 1, MPI_INTEGER, n + 5, 0, dup, ierr)
  call check(ierr /= MPI_SUCCESS, 'send to a bad rank fails')
  call MPI_Error_class(ierr, cls, i)
  call check(cls == MPI_ERR_RANK, 'error class is MPI_ERR_RANK')
  call MPI_Error_string(ierr, msg, length, i)
  call check(length > 0 .and. length <= MPI_MAX_ERROR_STRING .and. msg(length + 1:) == ' ', &
             'error string')
  call MPI_Send(ibuf, -1, MPI_INTEGER, 0, 0, dup, ierr)
  call MPI_Error_class(ierr, cls, i)
  call check(cls == MPI_ERR_COUNT, 'negative count is MPI_ERR_COUNT')
  call MPI_Comm_create_errhandler(remember_error, eh, ierr)
  call MPI_Comm_set_errhandler(dup, eh, ierr)
  deletes = 0
  call MPI_Send(ibuf, 1, MPI_INTEGER, n + 5, 0, dup, ierr)
  call check(deletes == 1000, 'Fortran error handler called')
  call MPI_Errhandler_free(eh, ierr)

  ! info
  call MPI_Info_create(info, ierr)
  call MPI_Info_set(info, 'color', 'blue  ', ierr)
  call MPI_Info_set(info, 'shape', 'round', ierr)
  call MPI_Info_get_nkeys(info, nkeys, ierr)
  call check(nkeys == 2, 'info nkeys')
  call MPI_Info_get(info, 'color', MPI_MAX_INFO_VAL, val, flag, ierr)
  call check(flag .and. val == 'blue', 'info get')
  call MPI_Info_get(info, 'missing', MPI_MAX_INFO_VAL, val, flag, ierr)
  call check(.not. flag, 'info get missing key')
  call MPI_Info_get_nthkey(info, 1, val, ierr)
  call check(val == 'shape', 'info nthkey')
  call MPI_Info_free(info, ierr)
  call check(info == MPI_INFO_NULL, 'info_free')

  ! attributes: predefined ones, then a keyval with Fortran callbacks
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, value, flag, ierr)
  call check(flag .and. value >= 32767, 'MPI_TAG_UB attribute')
  call MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, i, flag, ierr)
  call check(flag .and. i == value, 'MPI_Attr_get tag_ub')
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, value, flag, ierr)
  call check(.not. flag .or. value == 0 .or. value == 1, 'MPI_WTIME_IS_GLOBAL')
  call MPI_Comm_create_keyval(copy_plus_one, count_delete, keyval, 10_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_set_attr(dup, keyval, 5_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_get_attr(dup, keyval, value, flag, ierr)
  call check(flag .and. value == 5, 'set/get attribute')
  deletes = 0
  call MPI_Comm_dup(dup, newcomm, ierr)
  call MPI_Comm_get_attr(newcomm, keyval, value, flag, ierr)
  call check(flag .and. value == 16, 'Fortran copy callback ran on dup')
  call MPI_Comm_free(newcomm, ierr)
  call check(deletes == 1, 'Fortran delete callback ran on free')
  call MPI_Comm_delete_attr(dup, keyval, ierr)
  call check(deletes == 2, 'delete_attr calls the delete callback')
  call MPI_Comm_get_attr(dup, keyval, value, flag, ierr)
  call check(.not. flag, 'attribute gone')
  call MPI_Comm_free_keyval(keyval, ierr)
  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, keyval, &
                              0_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_set_attr(dup, keyval, 3_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_dup(dup, newcomm, ierr)
  call MPI_Comm_get_attr(newcomm, keyval, value, flag, ierr)
  call check(.not. flag, 'MPI_COMM_NULL_COPY_FN copies nothing')
  call MPI_Comm_free(newcomm, ierr)
  call MPI_Comm_free_keyval(keyval, ierr)
  call MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, keyval, &
                              0_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_set_attr(dup, keyval, 3_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_dup(dup, newcomm, ierr)
  call MPI_Comm_get_attr(newcomm, keyval, value, flag, ierr)
  call check(flag .and. value == 3, 'MPI_COMM_DUP_FN copies the value')
  call MPI_Comm_free(newcomm, ierr)
  call MPI_Comm_free_keyval(keyval, ierr)

  call MPI_Comm_free(split, ierr)
  call MPI_Comm_free(dup, ierr)
  call check(dup == MPI_COMM_NULL, 'comm_free')
  call MPI_Allreduce(nbad, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. total == 0) print '(A)', 'OK'
  call MPI_Finalize(ierr)
contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      nbad = nbad + 1
      print '(A,I0,2A)', 'FAIL rank ', rank, ': ', what
    end if
  end subroutine check
end program comm_types
