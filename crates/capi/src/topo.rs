//! Topology entry points: MPI_Dims_create, Cartesian, graph and
//! distributed-graph communicators and their queries. The arithmetic is
//! `resmpi_core::topology`; this file decodes arrays and checks arguments.

use std::sync::OnceLock;

use resmpi_core::topology::{self, Topology};
use resmpi_core::{ErrorClass, Mpi, MpiError, MpiResult};

use crate::abi::*;
use crate::global::entry;
use crate::global::out_pointer;
use crate::handles::comm_handle;
use crate::p2p::comm_of;

/// `count` ints at `values` (NULL allowed when `count` is 0).
unsafe fn int_array<'a>(values: *const c_int, count: c_int, what: &str) -> MpiResult<&'a [c_int]> {
    if count < 0 {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!("{what} count {count} is negative"),
        ));
    }
    if count == 0 {
        return Ok(&[]);
    }
    if values.is_null() {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!("{what} array is NULL"),
        ));
    }
    // SAFETY: the caller passes `count` ints.
    Ok(unsafe { std::slice::from_raw_parts(values, count as usize) })
}

/// Copy `values` to the caller's array of at least `values.len()` ints.
unsafe fn write_ints(values: &[i32], out: *mut c_int, what: &str) -> MpiResult<()> {
    if values.is_empty() {
        return Ok(());
    }
    out_pointer(out, what)?;
    // SAFETY: the caller's array holds at least values.len() ints (checked by the caller).
    unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), out, values.len()) };
    Ok(())
}

fn store_comm(newcomm: *mut MPI_Comm, index: Option<usize>) {
    // SAFETY: the callers check `newcomm` first.
    unsafe { *newcomm = index.map_or(MPI_COMM_NULL, comm_handle) };
}

/// The topology of `comm`, or MPI_ERR_TOPOLOGY when it has none.
fn topology_of(mpi: &Mpi, comm: MPI_Comm) -> MpiResult<(std::sync::Arc<Topology>, u32, u32)> {
    let communicator = mpi.comm(comm_of(mpi, comm)?)?;
    let topology = communicator
        .topology
        .clone()
        .ok_or_else(|| MpiError::new(ErrorClass::Topology, "the communicator has no topology"))?;
    Ok((topology, communicator.rank, communicator.size()))
}

/// The Cartesian grid of `comm` (dims, periods, rank), or MPI_ERR_TOPOLOGY.
fn cartesian_of(mpi: &Mpi, comm: MPI_Comm) -> MpiResult<(Vec<i32>, Vec<bool>, u32)> {
    let (topology, rank, _) = topology_of(mpi, comm)?;
    match &*topology {
        Topology::Cartesian { dims, periods } => Ok((dims.clone(), periods.clone(), rank)),
        _ => Err(MpiError::new(
            ErrorClass::Topology,
            "the communicator is not Cartesian",
        )),
    }
}

/// The graph of `comm` (index, edges), or MPI_ERR_TOPOLOGY.
fn graph_of(mpi: &Mpi, comm: MPI_Comm) -> MpiResult<(Vec<i32>, Vec<i32>)> {
    match &*topology_of(mpi, comm)?.0 {
        Topology::Graph { index, edges } => Ok((index.clone(), edges.clone())),
        _ => Err(MpiError::new(
            ErrorClass::Topology,
            "the communicator is not a graph",
        )),
    }
}

fn check_rank(rank: c_int, size: usize) -> MpiResult<()> {
    if rank < 0 || rank as usize >= size {
        return Err(MpiError::new(
            ErrorClass::Rank,
            format!("rank {rank} is out of range ({size} nodes)"),
        ));
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int {
    entry("MPI_Dims_create", MPI_COMM_WORLD, |_, _| {
        if ndims < 0 {
            return Err(MpiError::new(
                ErrorClass::Dims,
                format!("ndims {ndims} is negative"),
            ));
        }
        if ndims == 0 {
            return Ok(());
        }
        out_pointer(dims, "dims")?;
        // SAFETY: the caller's array holds ndims ints.
        let dims = unsafe { std::slice::from_raw_parts_mut(dims, ndims as usize) };
        topology::dims_create(nnodes, dims)
    })
}
const _: fn_types::MPI_Dims_create = PMPI_Dims_create;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_create(
    comm_old: MPI_Comm,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    _reorder: c_int,
    comm_cart: *mut MPI_Comm,
) -> c_int {
    entry("MPI_Cart_create", comm_old, |mpi, _| {
        let index = comm_of(mpi, comm_old)?;
        out_pointer(comm_cart, "comm_cart")?;
        if ndims < 0 {
            return Err(MpiError::new(
                ErrorClass::Dims,
                format!("ndims {ndims} is negative"),
            ));
        }
        // SAFETY: the caller passes ndims ints in each array.
        let dims = unsafe { int_array(dims, ndims, "dims") }?;
        // SAFETY: as above.
        let periods = unsafe { int_array(periods, ndims, "periods") }?;
        let periods: Vec<bool> = periods.iter().map(|period| *period != 0).collect();
        store_comm(comm_cart, mpi.cart_create(index, dims, &periods)?);
        Ok(())
    })
}
const _: fn_types::MPI_Cart_create = PMPI_Cart_create;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cartdim_get(comm: MPI_Comm, ndims: *mut c_int) -> c_int {
    entry("MPI_Cartdim_get", comm, |mpi, _| {
        let (dims, _, _) = cartesian_of(mpi, comm)?;
        out_pointer(ndims, "ndims")?;
        // SAFETY: checked non-null.
        unsafe { *ndims = dims.len() as c_int };
        Ok(())
    })
}
const _: fn_types::MPI_Cartdim_get = PMPI_Cartdim_get;

fn check_capacity(given: c_int, needed: usize, what: &str) -> MpiResult<()> {
    if given < 0 || (given as usize) < needed {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!("{what} {given} is smaller than the {needed} needed"),
        ));
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_get(
    comm: MPI_Comm,
    maxdims: c_int,
    dims: *mut c_int,
    periods: *mut c_int,
    coords: *mut c_int,
) -> c_int {
    entry("MPI_Cart_get", comm, |mpi, _| {
        let (grid, wrap, rank) = cartesian_of(mpi, comm)?;
        check_capacity(maxdims, grid.len(), "maxdims")?;
        let wrap: Vec<i32> = wrap.iter().map(|period| *period as i32).collect();
        // SAFETY: the caller's arrays hold maxdims >= ndims ints.
        unsafe {
            write_ints(&grid, dims, "dims")?;
            write_ints(&wrap, periods, "periods")?;
            write_ints(&topology::cart_coords(&grid, rank), coords, "coords")?;
        }
        Ok(())
    })
}
const _: fn_types::MPI_Cart_get = PMPI_Cart_get;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_coords(
    comm: MPI_Comm,
    rank: c_int,
    maxdims: c_int,
    coords: *mut c_int,
) -> c_int {
    entry("MPI_Cart_coords", comm, |mpi, _| {
        let (grid, _, _) = cartesian_of(mpi, comm)?;
        check_rank(rank, topology::grid_size(&grid)? as usize)?;
        check_capacity(maxdims, grid.len(), "maxdims")?;
        // SAFETY: the caller's array holds maxdims >= ndims ints.
        unsafe { write_ints(&topology::cart_coords(&grid, rank as u32), coords, "coords") }
    })
}
const _: fn_types::MPI_Cart_coords = PMPI_Cart_coords;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_rank(
    comm: MPI_Comm,
    coords: *const c_int,
    rank: *mut c_int,
) -> c_int {
    entry("MPI_Cart_rank", comm, |mpi, _| {
        let (grid, wrap, _) = cartesian_of(mpi, comm)?;
        out_pointer(rank, "rank")?;
        // SAFETY: the caller passes ndims coordinates.
        let coords = unsafe { int_array(coords, grid.len() as c_int, "coords") }?;
        let answer = topology::cart_rank(&grid, &wrap, coords)?;
        // SAFETY: checked non-null.
        unsafe { *rank = answer as c_int };
        Ok(())
    })
}
const _: fn_types::MPI_Cart_rank = PMPI_Cart_rank;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_shift(
    comm: MPI_Comm,
    direction: c_int,
    disp: c_int,
    rank_source: *mut c_int,
    rank_dest: *mut c_int,
) -> c_int {
    entry("MPI_Cart_shift", comm, |mpi, _| {
        let (grid, wrap, rank) = cartesian_of(mpi, comm)?;
        out_pointer(rank_source, "rank_source")?;
        out_pointer(rank_dest, "rank_dest")?;
        if direction < 0 || direction as usize >= grid.len() {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!(
                    "direction {direction} is out of range ({} dimensions)",
                    grid.len()
                ),
            ));
        }
        let (source, destination) =
            topology::cart_shift(&grid, &wrap, rank, direction as usize, disp);
        let as_rank = |rank: Option<u32>| rank.map_or(MPI_PROC_NULL, |rank| rank as c_int);
        // SAFETY: checked non-null.
        unsafe {
            *rank_source = as_rank(source);
            *rank_dest = as_rank(destination);
        }
        Ok(())
    })
}
const _: fn_types::MPI_Cart_shift = PMPI_Cart_shift;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_sub(
    comm: MPI_Comm,
    remain_dims: *const c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    entry("MPI_Cart_sub", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        let (grid, _, _) = cartesian_of(mpi, comm)?;
        out_pointer(newcomm, "newcomm")?;
        // SAFETY: the caller passes ndims flags.
        let remain = unsafe { int_array(remain_dims, grid.len() as c_int, "remain_dims") }?;
        let remain: Vec<bool> = remain.iter().map(|keep| *keep != 0).collect();
        store_comm(newcomm, Some(mpi.cart_sub(index, &remain)?));
        Ok(())
    })
}
const _: fn_types::MPI_Cart_sub = PMPI_Cart_sub;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_map(
    comm: MPI_Comm,
    ndims: c_int,
    dims: *const c_int,
    _periods: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    entry("MPI_Cart_map", comm, |mpi, _| {
        let communicator = mpi.comm(comm_of(mpi, comm)?)?;
        out_pointer(newrank, "newrank")?;
        // SAFETY: the caller passes ndims extents.
        let dims = unsafe { int_array(dims, ndims, "dims") }?;
        let nodes = topology::grid_size(dims)?;
        if nodes > communicator.size() as u64 {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!(
                    "grid of {nodes} is larger than the communicator ({})",
                    communicator.size()
                ),
            ));
        }
        let rank = communicator.rank;
        // SAFETY: checked non-null.
        unsafe {
            *newrank = if (rank as u64) < nodes {
                rank as c_int
            } else {
                MPI_UNDEFINED
            }
        };
        Ok(())
    })
}
const _: fn_types::MPI_Cart_map = PMPI_Cart_map;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Topo_test(comm: MPI_Comm, status: *mut c_int) -> c_int {
    entry("MPI_Topo_test", comm, |mpi, _| {
        let communicator = mpi.comm(comm_of(mpi, comm)?)?;
        out_pointer(status, "status")?;
        let kind = match communicator.topology.as_deref() {
            None => MPI_UNDEFINED,
            Some(Topology::Cartesian { .. }) => MPI_CART,
            Some(Topology::Graph { .. }) => MPI_GRAPH,
            Some(Topology::DistGraph { .. }) => MPI_DIST_GRAPH,
        };
        // SAFETY: checked non-null.
        unsafe { *status = kind };
        Ok(())
    })
}
const _: fn_types::MPI_Topo_test = PMPI_Topo_test;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graph_create(
    comm_old: MPI_Comm,
    nnodes: c_int,
    indx: *const c_int,
    edges: *const c_int,
    _reorder: c_int,
    comm_graph: *mut MPI_Comm,
) -> c_int {
    entry("MPI_Graph_create", comm_old, |mpi, _| {
        let index = comm_of(mpi, comm_old)?;
        out_pointer(comm_graph, "comm_graph")?;
        // SAFETY: the caller passes nnodes cumulative counts.
        let cumulative = unsafe { int_array(indx, nnodes, "index") }?;
        let edge_count = cumulative.last().copied().unwrap_or(0);
        // SAFETY: the caller passes index[nnodes-1] edges.
        let edges = unsafe { int_array(edges, edge_count, "edges") }?;
        store_comm(comm_graph, mpi.graph_create(index, cumulative, edges)?);
        Ok(())
    })
}
const _: fn_types::MPI_Graph_create = PMPI_Graph_create;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graphdims_get(
    comm: MPI_Comm,
    nnodes: *mut c_int,
    nedges: *mut c_int,
) -> c_int {
    entry("MPI_Graphdims_get", comm, |mpi, _| {
        let (index, edges) = graph_of(mpi, comm)?;
        out_pointer(nnodes, "nnodes")?;
        out_pointer(nedges, "nedges")?;
        // SAFETY: checked non-null.
        unsafe {
            *nnodes = index.len() as c_int;
            *nedges = edges.len() as c_int;
        }
        Ok(())
    })
}
const _: fn_types::MPI_Graphdims_get = PMPI_Graphdims_get;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graph_get(
    comm: MPI_Comm,
    maxindex: c_int,
    maxedges: c_int,
    indx: *mut c_int,
    edges: *mut c_int,
) -> c_int {
    entry("MPI_Graph_get", comm, |mpi, _| {
        let (index, graph_edges) = graph_of(mpi, comm)?;
        check_capacity(maxindex, index.len(), "maxindex")?;
        check_capacity(maxedges, graph_edges.len(), "maxedges")?;
        // SAFETY: the caller's arrays hold maxindex / maxedges ints.
        unsafe {
            write_ints(&index, indx, "index")?;
            write_ints(&graph_edges, edges, "edges")
        }
    })
}
const _: fn_types::MPI_Graph_get = PMPI_Graph_get;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graph_neighbors_count(
    comm: MPI_Comm,
    rank: c_int,
    nneighbors: *mut c_int,
) -> c_int {
    entry("MPI_Graph_neighbors_count", comm, |mpi, _| {
        let (index, edges) = graph_of(mpi, comm)?;
        check_rank(rank, index.len())?;
        out_pointer(nneighbors, "nneighbors")?;
        // SAFETY: checked non-null.
        unsafe {
            *nneighbors = topology::graph_neighbors(&index, &edges, rank as u32).len() as c_int
        };
        Ok(())
    })
}
const _: fn_types::MPI_Graph_neighbors_count = PMPI_Graph_neighbors_count;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graph_neighbors(
    comm: MPI_Comm,
    rank: c_int,
    maxneighbors: c_int,
    neighbors: *mut c_int,
) -> c_int {
    entry("MPI_Graph_neighbors", comm, |mpi, _| {
        let (index, edges) = graph_of(mpi, comm)?;
        check_rank(rank, index.len())?;
        let found = topology::graph_neighbors(&index, &edges, rank as u32);
        check_capacity(maxneighbors, found.len(), "maxneighbors")?;
        // SAFETY: the caller's array holds maxneighbors ints.
        unsafe { write_ints(found, neighbors, "neighbors") }
    })
}
const _: fn_types::MPI_Graph_neighbors = PMPI_Graph_neighbors;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graph_map(
    comm: MPI_Comm,
    nnodes: c_int,
    indx: *const c_int,
    edges: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    entry("MPI_Graph_map", comm, |mpi, _| {
        let communicator = mpi.comm(comm_of(mpi, comm)?)?;
        out_pointer(newrank, "newrank")?;
        // SAFETY: the caller passes nnodes cumulative counts.
        let cumulative = unsafe { int_array(indx, nnodes, "index") }?;
        // SAFETY: the caller passes index[nnodes-1] edges.
        let edges = unsafe { int_array(edges, cumulative.last().copied().unwrap_or(0), "edges") }?;
        topology::check_graph(cumulative.len(), cumulative, edges)?;
        if nnodes as u32 > communicator.size() {
            return Err(MpiError::new(
                ErrorClass::Arg,
                "graph larger than the communicator",
            ));
        }
        let rank = communicator.rank;
        // SAFETY: checked non-null.
        unsafe {
            *newrank = if (rank as i32) < nnodes {
                rank as c_int
            } else {
                MPI_UNDEFINED
            }
        };
        Ok(())
    })
}
const _: fn_types::MPI_Graph_map = PMPI_Graph_map;

/// The values of the MPI_UNWEIGHTED and MPI_WEIGHTS_EMPTY sentinels. They
/// are data objects of the generated C glue, looked up at run time so this
/// crate links without the glue (unit tests).
fn weight_sentinels() -> (usize, usize) {
    static SENTINELS: OnceLock<(usize, usize)> = OnceLock::new();
    *SENTINELS.get_or_init(|| {
        let read = |name: &std::ffi::CStr| {
            // SAFETY: dlsym with a NUL-terminated name; a found symbol is the
            // glue's `int *const` object, read once.
            unsafe {
                let address = libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr());
                if address.is_null() {
                    usize::MAX
                } else {
                    *(address as *const usize)
                }
            }
        };
        (read(c"MPI_UNWEIGHTED"), read(c"MPI_WEIGHTS_EMPTY"))
    })
}

/// Weights from C: None for MPI_UNWEIGHTED, otherwise `count` values
/// (MPI_WEIGHTS_EMPTY or any pointer when `count` is 0).
unsafe fn weights(values: *const c_int, count: c_int) -> MpiResult<Option<Vec<i32>>> {
    let (unweighted, empty) = weight_sentinels();
    if values as usize == unweighted {
        return Ok(None);
    }
    if count == 0 || values as usize == empty {
        return Ok(Some(Vec::new()));
    }
    // SAFETY: the caller passes count weights.
    Ok(Some(
        unsafe { int_array(values, count, "weights") }?.to_vec(),
    ))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Dist_graph_create_adjacent(
    comm_old: MPI_Comm,
    indegree: c_int,
    sources: *const c_int,
    sourceweights: *const c_int,
    outdegree: c_int,
    destinations: *const c_int,
    destweights: *const c_int,
    _info: MPI_Info,
    _reorder: c_int,
    comm_dist_graph: *mut MPI_Comm,
) -> c_int {
    entry("MPI_Dist_graph_create_adjacent", comm_old, |mpi, _| {
        let index = comm_of(mpi, comm_old)?;
        out_pointer(comm_dist_graph, "comm_dist_graph")?;
        // SAFETY: the caller passes indegree sources and outdegree destinations.
        let (sources, destinations) = unsafe {
            (
                int_array(sources, indegree, "sources")?.to_vec(),
                int_array(destinations, outdegree, "destinations")?.to_vec(),
            )
        };
        // SAFETY: as above, for the weights.
        let (source_weights, destination_weights) = unsafe {
            (
                weights(sourceweights, indegree)?,
                weights(destweights, outdegree)?,
            )
        };
        let weighted = source_weights.is_some() || destination_weights.is_some();
        let topology = Topology::DistGraph {
            source_weights: source_weights.unwrap_or_else(|| vec![1; sources.len()]),
            destination_weights: destination_weights.unwrap_or_else(|| vec![1; destinations.len()]),
            sources,
            destinations,
            weighted,
        };
        store_comm(
            comm_dist_graph,
            Some(mpi.dist_graph_create_adjacent(index, topology)?),
        );
        Ok(())
    })
}
const _: fn_types::MPI_Dist_graph_create_adjacent = PMPI_Dist_graph_create_adjacent;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Dist_graph_create(
    comm_old: MPI_Comm,
    n: c_int,
    sources: *const c_int,
    degrees: *const c_int,
    destinations: *const c_int,
    weights_in: *const c_int,
    _info: MPI_Info,
    _reorder: c_int,
    comm_dist_graph: *mut MPI_Comm,
) -> c_int {
    entry("MPI_Dist_graph_create", comm_old, |mpi, _| {
        let index = comm_of(mpi, comm_old)?;
        out_pointer(comm_dist_graph, "comm_dist_graph")?;
        // SAFETY: the caller passes n sources and n degrees.
        let (sources, degrees) = unsafe {
            (
                int_array(sources, n, "sources")?,
                int_array(degrees, n, "degrees")?,
            )
        };
        if degrees.iter().any(|degree| *degree < 0) {
            return Err(MpiError::new(ErrorClass::Arg, "a degree is negative"));
        }
        let edge_count: i64 = degrees.iter().map(|degree| *degree as i64).sum();
        let edge_count = c_int::try_from(edge_count)
            .map_err(|_| MpiError::new(ErrorClass::Arg, "too many edges"))?;
        // SAFETY: the caller passes sum(degrees) destinations and weights.
        let (destinations, weights) = unsafe {
            (
                int_array(destinations, edge_count, "destinations")?,
                weights(weights_in, edge_count)?,
            )
        };
        let mut edges = Vec::with_capacity(edge_count as usize);
        let mut next = 0;
        for (source, degree) in sources.iter().zip(degrees) {
            for _ in 0..*degree {
                let weight = weights
                    .as_ref()
                    .and_then(|all| all.get(next).copied())
                    .unwrap_or(1);
                edges.push([*source, destinations[next], weight]);
                next += 1;
            }
        }
        store_comm(
            comm_dist_graph,
            Some(mpi.dist_graph_create(index, &edges, weights.is_some())?),
        );
        Ok(())
    })
}
const _: fn_types::MPI_Dist_graph_create = PMPI_Dist_graph_create;

/// This process's distributed-graph edges, or MPI_ERR_TOPOLOGY.
fn dist_graph_of(mpi: &Mpi, comm: MPI_Comm) -> MpiResult<std::sync::Arc<Topology>> {
    let (topology, _, _) = topology_of(mpi, comm)?;
    match &*topology {
        Topology::DistGraph { .. } => Ok(topology),
        _ => Err(MpiError::new(
            ErrorClass::Topology,
            "the communicator is not a distributed graph",
        )),
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Dist_graph_neighbors_count(
    comm: MPI_Comm,
    indegree: *mut c_int,
    outdegree: *mut c_int,
    weighted: *mut c_int,
) -> c_int {
    entry("MPI_Dist_graph_neighbors_count", comm, |mpi, _| {
        let topology = dist_graph_of(mpi, comm)?;
        let Topology::DistGraph {
            sources,
            destinations,
            weighted: has_weights,
            ..
        } = &*topology
        else {
            unreachable!("checked by dist_graph_of");
        };
        out_pointer(indegree, "indegree")?;
        out_pointer(outdegree, "outdegree")?;
        out_pointer(weighted, "weighted")?;
        // SAFETY: checked non-null.
        unsafe {
            *indegree = sources.len() as c_int;
            *outdegree = destinations.len() as c_int;
            *weighted = *has_weights as c_int;
        }
        Ok(())
    })
}
const _: fn_types::MPI_Dist_graph_neighbors_count = PMPI_Dist_graph_neighbors_count;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Dist_graph_neighbors(
    comm: MPI_Comm,
    maxindegree: c_int,
    sources: *mut c_int,
    sourceweights: *mut c_int,
    maxoutdegree: c_int,
    destinations: *mut c_int,
    destweights: *mut c_int,
) -> c_int {
    entry("MPI_Dist_graph_neighbors", comm, |mpi, _| {
        let topology = dist_graph_of(mpi, comm)?;
        let Topology::DistGraph {
            sources: in_ranks,
            source_weights,
            destinations: out_ranks,
            destination_weights,
            weighted,
        } = &*topology
        else {
            unreachable!("checked by dist_graph_of");
        };
        check_capacity(maxindegree, in_ranks.len(), "maxindegree")?;
        check_capacity(maxoutdegree, out_ranks.len(), "maxoutdegree")?;
        let (unweighted, _) = weight_sentinels();
        // SAFETY: the caller's arrays hold maxindegree / maxoutdegree ints.
        unsafe {
            write_ints(in_ranks, sources, "sources")?;
            write_ints(out_ranks, destinations, "destinations")?;
            if *weighted {
                if sourceweights as usize != unweighted {
                    write_ints(source_weights, sourceweights, "sourceweights")?;
                }
                if destweights as usize != unweighted {
                    write_ints(destination_weights, destweights, "destweights")?;
                }
            }
        }
        Ok(())
    })
}
const _: fn_types::MPI_Dist_graph_neighbors = PMPI_Dist_graph_neighbors;
