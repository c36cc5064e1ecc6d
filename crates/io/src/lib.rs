//! MPI-IO's storage side for resmpi, with no MPI in it.
//!
//! Why a crate of its own: what a file view means in file bytes, where the
//! copies of a replicated block live and how a damaged copy is found and
//! repaired are questions about files and arithmetic, not about handles or
//! communicators. Keeping them here makes them unit-testable without a job;
//! `resmpi-capi` (`file.rs`) is the glue that turns MPI_File_* calls into
//! calls on these types, and the `resmpi-io` command scrubs a replicated
//! file with the same code.
//!
//! - [`view`]: an etype/filetype view flattened to byte extents of the file.
//! - [`placement`]: which storage target holds which copy of a block, and
//!   the metadata kept with a replicated file.
//! - [`store`]: a file as the library sees it, plain or replicated, with
//!   per-block CRC32C, read fallback, read-repair and scrub.
//! - [`aggregation`]: two-phase collective I/O: file domains, rounds and
//!   the pieces each process sends to each aggregator.
//! - [`lock`]: fcntl byte-range locks (atomic mode, block updates, the
//!   shared file pointer).
#![warn(missing_docs)]

pub mod aggregation;
pub mod lock;
pub mod placement;
pub mod store;
pub mod view;
