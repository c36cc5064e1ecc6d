//! The PMIx client: Slurm's `srun --mpi=pmix` and other PMIx process
//! managers start ranks with `PMIX_NAMESPACE` and a server URI rather than
//! a PMI socket. PMIx's wire protocol is the library's private business, so
//! this speaks it through the real libpmix (Debian's libpmix2), loaded at
//! run time by a small C shim (`csrc/pmix_shim.c`, which has pmix.h's
//! types): libmpi.so keeps no dependency on libpmix.
//!
//! Keys and values are strings (business cards), put with `PMIX_GLOBAL`
//! scope, committed and exchanged by a fence that collects the data.
use std::ffi::{c_char, c_int, CStr, CString};

use crate::PmiError;

extern "C" {
    fn resmpi_pmix_error() -> *const c_char;
    fn resmpi_pmix_init(
        rank: *mut u32,
        size: *mut u32,
        local_rank: *mut u32,
        local_size: *mut u32,
        namespace_out: *mut c_char,
        namespace_bytes: usize,
    ) -> c_int;
    fn resmpi_pmix_put(key: *const c_char, value: *const c_char) -> c_int;
    fn resmpi_pmix_fence() -> c_int;
    fn resmpi_pmix_get(rank: u32, key: *const c_char, out: *mut c_char, out_bytes: usize) -> c_int;
    fn resmpi_pmix_abort(status: c_int, message: *const c_char);
    fn resmpi_pmix_finalize() -> c_int;
}

/// The longest value [`PmixClient::get`] takes back (a business card is a
/// few hundred bytes).
pub const VALUE_MAX_BYTES: usize = 4096;

/// What PMIx_Init told: who this process is in which job.
pub struct PmixJob {
    /// Rank in the job.
    pub rank: u32,
    /// Processes in the job.
    pub size: u32,
    /// Rank among the job's processes on this node.
    pub local_rank: u32,
    /// The job's processes on this node.
    pub local_size: u32,
    /// The job's namespace (the key-value space's name).
    pub namespace: String,
}

/// An initialized PMIx client (one per process).
pub struct PmixClient;

fn last_error(operation: &str) -> PmiError {
    // SAFETY: the shim returns a pointer to its own NUL-terminated buffer.
    let text = unsafe { CStr::from_ptr(resmpi_pmix_error()) }
        .to_string_lossy()
        .into_owned();
    PmiError::new(format!("{operation}: {text}"))
}

fn c_string(text: &str, what: &str) -> Result<CString, PmiError> {
    CString::new(text).map_err(|_| PmiError::new(format!("PMIx {what} contains a NUL byte")))
}

impl PmixClient {
    /// Loads libpmix and calls PMIx_Init.
    pub fn init() -> Result<(PmixClient, PmixJob), PmiError> {
        let (mut rank, mut size, mut local_rank, mut local_size) = (0, 0, 0, 1);
        let mut namespace = [0 as c_char; 256];
        // SAFETY: every pointer is to a local of the declared type; the
        // namespace buffer's length is passed with it.
        let rc = unsafe {
            resmpi_pmix_init(
                &mut rank,
                &mut size,
                &mut local_rank,
                &mut local_size,
                namespace.as_mut_ptr(),
                namespace.len(),
            )
        };
        if rc != 0 {
            return Err(last_error("PMIx client"));
        }
        // SAFETY: the shim NUL-terminates within the buffer (snprintf).
        let namespace = unsafe { CStr::from_ptr(namespace.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Ok((
            PmixClient,
            PmixJob {
                rank,
                size,
                local_rank,
                local_size: local_size.max(1),
                namespace,
            },
        ))
    }

    /// Publishes `key=value` for the whole job (seen after [`Self::fence`]).
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError> {
        let (key, value) = (c_string(key, "key")?, c_string(value, "value")?);
        // SAFETY: two NUL-terminated strings that outlive the call.
        match unsafe { resmpi_pmix_put(key.as_ptr(), value.as_ptr()) } {
            0 => Ok(()),
            _ => Err(last_error("put")),
        }
    }

    /// Commits this process's puts and waits for every process of the job.
    pub fn fence(&mut self) -> Result<(), PmiError> {
        // SAFETY: no arguments.
        match unsafe { resmpi_pmix_fence() } {
            0 => Ok(()),
            _ => Err(last_error("fence")),
        }
    }

    /// The value `rank` put under `key`, None when it put none.
    pub fn get(&mut self, rank: u32, key: &str) -> Result<Option<String>, PmiError> {
        let key = c_string(key, "key")?;
        let mut out = vec![0 as c_char; VALUE_MAX_BYTES];
        // SAFETY: a NUL-terminated key and a buffer of the length passed.
        match unsafe { resmpi_pmix_get(rank, key.as_ptr(), out.as_mut_ptr(), out.len()) } {
            // SAFETY: on success the shim wrote a NUL-terminated string.
            0 => Ok(Some(
                unsafe { CStr::from_ptr(out.as_ptr()) }
                    .to_string_lossy()
                    .into_owned(),
            )),
            1 => Ok(None),
            _ => Err(last_error("get")),
        }
    }

    /// Asks the process manager to end the job.
    pub fn abort(&mut self, exit_code: i32, message: &str) {
        let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: a NUL-terminated message that outlives the call.
        unsafe { resmpi_pmix_abort(exit_code, message.as_ptr()) }
    }

    /// PMIx_Finalize.
    pub fn finalize(&mut self) -> Result<(), PmiError> {
        // SAFETY: no arguments.
        match unsafe { resmpi_pmix_finalize() } {
            0 => Ok(()),
            _ => Err(last_error("finalize")),
        }
    }
}
