//! The part of the launcher other crates may use: the frames between
//! `mpiexec` and its per-host proxies, exposed so that the fuzz targets
//! (which need a library) reach the same decoder `mpiexec` runs. Everything
//! else of the launcher lives in the `mpiexec` binary.

#![warn(missing_docs)]

pub mod proxy_protocol;
