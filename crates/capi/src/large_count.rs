//! MPI-4's large-count (`_c`) entry points beside the classic ones.
//!
//! As in MPICH, each function has one implementation that takes wide
//! counts; the `int` entry point and the `_c` one differ only in the C
//! type of their counts. The implementation is generic over [`Count`]
//! (`c_int` or `MPI_Count`): it widens every count on entry (scalars with
//! `.into()`, arrays entry by entry) and narrows what it hands back with
//! [`narrow`], so a result that does not fit an `int` is an MPI_ERR_COUNT
//! naming the function (or MPI_UNDEFINED where the standard says so),
//! never a silently truncated value. [`int_and_large_count!`] writes the
//! two `extern "C"` entry points from one parameter list.

use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;

/// The C type of a count argument: `c_int` in the classic functions,
/// `MPI_Count` in the `_c` ones.
pub trait Count: Copy + Into<MPI_Count> + TryFrom<MPI_Count> + Send + Sync + 'static {
    /// The largest count of this type.
    const MAX: MPI_Count;
    /// Whether this is the `_c` form's `MPI_Count`.
    const LARGE: bool;
}

impl Count for c_int {
    const MAX: MPI_Count = c_int::MAX as MPI_Count;
    const LARGE: bool = false;
}

impl Count for MPI_Count {
    const MAX: MPI_Count = MPI_Count::MAX;
    const LARGE: bool = true;
}

/// `value` as a count of type `C`, or MPI_ERR_COUNT naming `name` when it
/// does not fit (a classic function asked about a large message: its `_c`
/// form answers).
pub fn narrow<C: Count>(name: &str, what: &str, value: MPI_Count) -> MpiResult<C> {
    C::try_from(value).map_err(|_| {
        MpiError::new(
            ErrorClass::Count,
            format!(
                "{name}: {what} {value} does not fit the int the function returns \
                 (at most {}); use {name}_c",
                C::MAX
            ),
        )
    })
}

/// Two `extern "C"` entry points (`PMPI_x = MPI_x, PMPI_x_c = MPI_x_c`)
/// from one parameter list, in which the
/// count arguments have the type `Count` (an `int` in the first, an
/// `MPI_Count` in the second): both call `$inner(name, arguments...)`,
/// which is generic over [`Count`]; `name` is `MPI_x` or `MPI_x_c`. Each
/// is checked against the table's signature (`fn_types`).
macro_rules! int_and_large_count {
    ($int:ident = $int_name:ident, $large:ident = $large_name:ident, $inner:path,
     ($($arg:ident: $ty:ty),* $(,)?)) => {
        #[allow(non_snake_case)]
        mod $int {
            #[allow(unused_imports)]
            use super::*;
            #[allow(dead_code)]
            type Count = c_int;
            #[no_mangle]
            pub unsafe extern "C" fn $int($($arg: $ty),*) -> c_int {
                // SAFETY: the caller's arguments, as MPI defines them.
                unsafe { $inner(stringify!($int_name), $($arg),*) }
            }
            const _: $crate::abi::fn_types::$int_name = $int;
        }
        #[allow(unused_imports)]
        pub use $int::$int;
        #[allow(non_snake_case)]
        mod $large {
            #[allow(unused_imports)]
            use super::*;
            #[allow(dead_code)]
            type Count = MPI_Count;
            #[no_mangle]
            pub unsafe extern "C" fn $large($($arg: $ty),*) -> c_int {
                // SAFETY: the caller's arguments, as MPI defines them.
                unsafe { $inner(stringify!($large_name), $($arg),*) }
            }
            const _: $crate::abi::fn_types::$large_name = $large;
        }
        #[allow(unused_imports)]
        pub use $large::$large;
    };
    // The same with the body written out: `name` is bound to `MPI_x` or
    // `MPI_x_c` and the parameters to the caller's arguments.
    ($int:ident = $int_name:ident, $large:ident = $large_name:ident, |$name:ident| $body:block,
     ($($arg:ident: $ty:ty),* $(,)?)) => {
        #[allow(non_snake_case)]
        mod $int {
            #[allow(unused_imports)]
            use super::*;
            #[allow(dead_code)]
            type Count = c_int;
            #[no_mangle]
            pub unsafe extern "C" fn $int($($arg: $ty),*) -> c_int {
                let $name: &str = stringify!($int_name);
                $body
            }
            const _: $crate::abi::fn_types::$int_name = $int;
        }
        #[allow(unused_imports)]
        pub use $int::$int;
        #[allow(non_snake_case)]
        mod $large {
            #[allow(unused_imports)]
            use super::*;
            #[allow(dead_code)]
            type Count = MPI_Count;
            #[no_mangle]
            pub unsafe extern "C" fn $large($($arg: $ty),*) -> c_int {
                let $name: &str = stringify!($large_name);
                $body
            }
            const _: $crate::abi::fn_types::$large_name = $large;
        }
        #[allow(unused_imports)]
        pub use $large::$large;
    };
}
pub(crate) use int_and_large_count;

/// The whole binding of one collective, from one table line: its blocking
/// and nonblocking entry points, each in its int and `_c` form, and the
/// nonblocking call generic over the count type (`$generic`, which the
/// persistent forms start: `persistent_coll.rs`).
///
/// Every form runs `$body(mpi, global, arguments…, extra…, request)`;
/// `request` is `None` for the blocking call. An argument marked
/// `=> into` is widened (`MPI_Count`) on the way; `$body[extra…]` appends
/// constant arguments. With `fast $fast`, the blocking call first tries
/// `$fast(mpi, arguments…, extra…)`, the shared-memory path of small
/// collectives, which answers `None` when it does not apply. Argument
/// checks live in the body, so every form checks alike.
macro_rules! collective {
    ($blocking:ident = $blocking_name:ident, $blocking_c:ident = $blocking_c_name:ident,
     $nonblocking:ident = $nonblocking_name:ident,
     $nonblocking_c:ident = $nonblocking_c_name:ident,
     $generic:ident: $body:path $([$($extra:expr),*])?, $comm:ident,
     fast $fast:path $([$($fast_extra:expr),*])?,
     ($($argument:ident: $type:ty $(=> $convert:ident)?),* $(,)?)) => {
        $crate::large_count::collective!(@entries $blocking = $blocking_name,
            $blocking_c = $blocking_c_name, $nonblocking = $nonblocking_name,
            $nonblocking_c = $nonblocking_c_name, $generic: $body $([$($extra),*])?, $comm,
            ($($argument: $type $(=> $convert)?),*), |mpi| {
                if let Some(done) =
                    $fast(mpi, $($argument $(.$convert())?,)* $($($fast_extra,)*)?)
                {
                    return done;
                }
            });
    };
    ($blocking:ident = $blocking_name:ident, $blocking_c:ident = $blocking_c_name:ident,
     $nonblocking:ident = $nonblocking_name:ident,
     $nonblocking_c:ident = $nonblocking_c_name:ident,
     $generic:ident: $body:path $([$($extra:expr),*])?, $comm:ident,
     ($($argument:ident: $type:ty $(=> $convert:ident)?),* $(,)?)) => {
        $crate::large_count::collective!(@entries $blocking = $blocking_name,
            $blocking_c = $blocking_c_name, $nonblocking = $nonblocking_name,
            $nonblocking_c = $nonblocking_c_name, $generic: $body $([$($extra),*])?, $comm,
            ($($argument: $type $(=> $convert)?),*), |mpi| {});
    };
    (@entries $blocking:ident = $blocking_name:ident, $blocking_c:ident = $blocking_c_name:ident,
     $nonblocking:ident = $nonblocking_name:ident,
     $nonblocking_c:ident = $nonblocking_c_name:ident,
     $generic:ident: $body:path $([$($extra:expr),*])?, $comm:ident,
     ($($argument:ident: $type:ty $(=> $convert:ident)?),*), |$mpi:ident| $fast:block) => {
        /// The nonblocking call, for either count type.
        #[allow(clippy::too_many_arguments, dead_code)]
        pub(crate) unsafe fn $generic<Count: $crate::large_count::Count>(
            name: &str,
            $($argument: $type,)*
            request: *mut MPI_Request,
        ) -> c_int {
            entry(name, $comm, |$mpi, global| {
                let request = request_out(request)?;
                #[allow(unused_unsafe)]
                // SAFETY: the caller's arguments, as MPI defines them.
                let done = unsafe {
                    $body($mpi, global, $($argument $(.$convert())?,)* $($($extra,)*)? request)
                };
                done
            })
        }
        $crate::large_count::int_and_large_count!($blocking = $blocking_name,
            $blocking_c = $blocking_c_name, |name| {
            entry(name, $comm, |$mpi, global| {
                $fast
                #[allow(unused_unsafe)]
                // SAFETY: the caller's arguments, as MPI defines them.
                let done = unsafe {
                    $body($mpi, global, $($argument $(.$convert())?,)* $($($extra,)*)? None)
                };
                done
            })
        }, ($($argument: $type),*));
        $crate::large_count::int_and_large_count!($nonblocking = $nonblocking_name,
            $nonblocking_c = $nonblocking_c_name, $generic,
            ($($argument: $type,)* request: *mut MPI_Request));
    };
}
pub(crate) use collective;
