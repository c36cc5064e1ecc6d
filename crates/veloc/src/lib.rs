//! Per-rank checkpoint files behind resmpi's VeloC API (`veloc.h`, issue 13
//! item 4): what a checkpoint file holds and how it is written, checked and
//! found again. No MPI here and no process state: the C entry points
//! (`crates/capi/src/veloc.rs`) own the protected regions, the collective
//! `VELOC_Restart_test` and the message-logging hooks; this crate owns the
//! bytes on disk, so they can be tested (and broken on purpose) alone.
//!
//! Why per rank and uncoordinated: message logging restarts one rank from
//! its own last checkpoint while the others go on (the paper's model), so a
//! checkpoint is one rank's file, written when that rank calls
//! `VELOC_Checkpoint`, never a job-wide set taken together.
//!
//! What must hold:
//! - a file that exists under its final name is complete: it is written to
//!   a temporary name in the same directory, synced, renamed, and the
//!   directory synced ([`atomic_file::write_atomically`]);
//! - a file whose bytes changed is refused: every byte before the trailer
//!   is covered by a CRC32C ([`format`]), and so are the name, rank and
//!   version inside, so a file renamed by hand is refused too;
//! - a corrupt newest version is not the end: [`store::CheckpointStore::latest_intact`]
//!   falls back to the newest intact one at or below the bound.
#![warn(missing_docs)]

pub mod atomic_file;
pub mod config;
pub mod format;
pub mod restart_tests;
pub mod store;

pub use config::Config;
pub use format::{Checkpoint, FormatError, Region, POSITION_REGION_ID};
pub use restart_tests::{RestartTest, RestartTestLog};
pub use store::{valid_name, CheckpointStore, Refusal};
