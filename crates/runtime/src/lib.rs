//! Runtime services a resmpi rank needs before any message moves: who am I,
//! how many are we, where do my peers listen, and how is this job configured.
//!
//! The process manager (our `mpiexec`, MPICH's `mpiexec.hydra`, Slurm's
//! `srun`) is reached through whichever interface it offers: the PMI-1
//! "simple" wire protocol, PMI-2 (Slurm's `mpi/pmi2`), or PMIx through
//! libpmix (`pmix`), so the same library runs under any of them. This crate
//! owns that client ([`Pmi`]), the line codec shared with the launcher's PMI
//! server ([`codec`]), the job
//! configuration read from `RESMPI_*` variables ([`Config`]) and the source of
//! job secrets ([`random_bytes`]).
//!
//! It must not know about paths, frames or MPI semantics: it hands out
//! strings and numbers, and the layers above decide what they mean.
#![warn(missing_docs)]

pub mod codec;
mod config;
mod error;
mod hex;
pub mod notices;
mod pmi;
mod pmix;
mod random;

pub use config::{
    parse_byte_count, Config, FailurePolicy, MessageLogging, PathsChoice, SdcChoice, StripeChoice,
};
pub use error::PmiError;
pub use hex::{hex_decode, hex_encode};
pub use notices::FailureNotices;
pub use pmi::{Pmi, RejoinAnswer};
pub use random::random_bytes;

/// Exit status of a replica that left the job because its siblings
/// outvoted it (`--sdc vote`): the launcher names it in its death notice.
pub const OUTVOTED_EXIT_CODE: i32 = 86;

/// The variable in which resmpi's mpiexec names the socket a replica forked
/// by a substitute registers on (`--replica-recovery now`).
pub const FORK_SOCKET_VARIABLE: &str = "RESMPI_FORK_SOCKET";
