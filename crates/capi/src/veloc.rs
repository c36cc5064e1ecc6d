//! VeloC's memory-based C API (`veloc.h`, issue 13 item 4), in the same
//! library as `MPI_*`, so `mpicc` programs written for VeloC (its own
//! `heatdis_mem.c`) link unchanged.
//!
//! Why here and not in VeloC's client/backend split: resmpi has no
//! backend daemon; a checkpoint is written synchronously by the rank
//! itself (atomically, checksummed: `resmpi-veloc`), which is what VeloC's
//! `sync` mode does. The file format, the directory scan and the recorded
//! Restart_test answers live in `crates/veloc`; this file owns the
//! process state (protected regions, the phase between `_begin` and
//! `_end`) and the one collective, `VELOC_Restart_test`'s agreement on a
//! version every rank has.
//!
//! Message logging: under `--msglog pessimistic` a restarted rank re-runs
//! from `MPI_Init` and replays. Each `VELOC_Restart_test` answer is
//! recorded in the checkpoint directory before the call returns, and a
//! replay of the call makes as many `MPI_Allreduce` rounds as the original
//! (the peers' halves come from their logs, its own are dropped as
//! duplicates) and returns the recorded answer, so the replay takes the
//! branch the original took (see `resmpi_veloc::restart_tests`).
//!
//! Every failure returns `VELOC_FAILURE` with one line on stderr naming the
//! call and the reason; none aborts the process.

use crate::abi::{self, MPI_Comm};
use resmpi_core::engine::CheckpointPosition;
use resmpi_veloc::{
    CheckpointStore, Config, Region, RestartTest, RestartTestLog, POSITION_REGION_ID,
};
use std::collections::BTreeMap;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// `VELOC_SUCCESS`.
pub const VELOC_SUCCESS: c_int = 0;
/// `VELOC_FAILURE`.
pub const VELOC_FAILURE: c_int = -1;
/// `VELOC_MAX_NAME`: the size of `VELOC_Route_file`'s output buffer.
pub const VELOC_MAX_NAME: usize = 1024;
/// `VELOC_RECOVER_ALL` / `VELOC_CKPT_ALL`.
const SELECT_ALL: c_int = 0;
/// `VELOC_RECOVER_SOME` / `VELOC_CKPT_SOME`.
const SELECT_SOME: c_int = 1;
/// `VELOC_RECOVER_REST` / `VELOC_CKPT_REST`.
const SELECT_REST: c_int = 2;

/// The variable `mpiexec --ckpt-dir` sets.
const CHECKPOINT_DIRECTORY_VARIABLE: &str = "RESMPI_CKPT_DIR";

/// A protected region: the application's memory, read at checkpoint and
/// written at restart.
#[derive(Clone, Copy)]
struct Protected {
    address: usize,
    bytes: usize,
}

/// Between `_begin` and `_end`.
enum Phase {
    Idle,
    Checkpoint {
        name: String,
        version: u32,
        written: bool,
        failed: bool,
        /// Message logging: the position saved in the file, when a
        /// replacement can resume from it.
        position: Option<CheckpointPosition>,
    },
    Restart {
        name: String,
        version: u32,
        checkpoint: resmpi_veloc::Checkpoint,
    },
}

struct Client {
    /// `VELOC_Init`'s communicator; `None` after `VELOC_Init_single`.
    comm: Option<MPI_Comm>,
    store: CheckpointStore,
    max_versions: u32,
    regions: BTreeMap<i32, Protected>,
    phase: Phase,
    /// Under `--msglog`: the recorded answers of this rank in this job.
    restart_tests: Option<RestartTestLog>,
}

// SAFETY: the addresses in `regions` are only dereferenced by the thread
// that calls VELOC (under the mutex); the client holds no other pointer.
unsafe impl Send for Client {}

static CLIENT: Mutex<Option<Client>> = Mutex::new(None);

/// How many `VELOC_Restart_test` calls this process made, over all its
/// `VELOC_Init`/`VELOC_Finalize` cycles: the key of a recorded answer,
/// which must not repeat within a process (a second cycle's first call is
/// not the first cycle's).
static RESTART_TEST_COUNT: AtomicU64 = AtomicU64::new(0);

fn fail(call: &str, reason: impl std::fmt::Display) -> c_int {
    eprintln!("{call}: {reason}");
    VELOC_FAILURE
}

/// Run `body` on the initialized client, or fail naming `call`.
fn with_client(call: &str, body: impl FnOnce(&mut Client) -> Result<c_int, String>) -> c_int {
    let mut guard = CLIENT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    match guard.as_mut() {
        None => fail(call, "VeloC is not initialized (call VELOC_Init first)"),
        Some(client) => body(client).unwrap_or_else(|reason| fail(call, reason)),
    }
}

/// A C string argument, checked.
///
/// # Safety
/// `text` is null or NUL-terminated.
unsafe fn string_argument(text: *const c_char, what: &str) -> Result<String, String> {
    if text.is_null() {
        return Err(format!("{what} is NULL"));
    }
    // SAFETY: non-null and NUL-terminated by the caller's contract.
    let text = unsafe { CStr::from_ptr(text) };
    text.to_str()
        .map(str::to_string)
        .map_err(|_| format!("{what} is not UTF-8"))
}

fn checked_name_version(name: &str, version: c_int) -> Result<u32, String> {
    if !resmpi_veloc::valid_name(name) {
        return Err(format!(
            "checkpoint name '{name}': only [a-zA-Z0-9_], at most {VELOC_MAX_NAME} bytes"
        ));
    }
    u32::try_from(version).map_err(|_| format!("version {version}: must be non-negative"))
}

fn mpi_initialized() -> bool {
    let mut initialized: c_int = 0;
    let mut finalized: c_int = 0;
    // SAFETY: both pointers are to locals.
    unsafe {
        crate::init::PMPI_Initialized(&mut initialized);
        crate::init::PMPI_Finalized(&mut finalized);
    }
    initialized != 0 && finalized == 0
}

fn initialize(
    comm: Option<MPI_Comm>,
    rank: u32,
    cfg_file: *const c_char,
) -> Result<Client, String> {
    let override_directory = std::env::var(CHECKPOINT_DIRECTORY_VARIABLE).ok();
    let config = if cfg_file.is_null() {
        if override_directory.is_none() {
            return Err(format!(
                "cfg_file is NULL and {CHECKPOINT_DIRECTORY_VARIABLE} (mpiexec --ckpt-dir) is not set"
            ));
        }
        Config::default()
    } else {
        // SAFETY: non-null; VeloC's contract is a NUL-terminated path.
        let path = unsafe { string_argument(cfg_file, "cfg_file") }?;
        let text = std::fs::read_to_string(&path)
            .map_err(|error| format!("cfg file '{path}': {error}"))?;
        Config::parse(&text).map_err(|error| format!("cfg file '{path}': {error}"))?
    };
    let directory = config
        .checkpoint_directory(override_directory.as_deref())
        .ok_or_else(|| {
            "no checkpoint directory: give mpiexec --ckpt-dir, or scratch/persistent in the cfg file"
                .to_string()
        })?;
    std::fs::create_dir_all(&directory)
        .map_err(|error| format!("checkpoint directory '{}': {error}", directory.display()))?;
    let max_versions = config.max_versions()?;
    let restart_tests = std::env::var("RESMPI_MSGLOG")
        .ok()
        .filter(|mode| !mode.is_empty() && mode != "none")
        .map(|_| {
            let job = std::env::var("RESMPI_JOB_ID").unwrap_or_default();
            RestartTestLog::load(&directory, rank, &job)
        });
    Ok(Client {
        comm,
        store: CheckpointStore::new(directory, rank),
        max_versions,
        regions: BTreeMap::new(),
        phase: Phase::Idle,
        restart_tests,
    })
}

fn install(call: &str, client: Result<Client, String>) -> c_int {
    let mut guard = CLIENT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if guard.is_some() {
        return fail(call, "VeloC is already initialized");
    }
    match client {
        Ok(client) => {
            *guard = Some(client);
            VELOC_SUCCESS
        }
        Err(reason) => fail(call, reason),
    }
}

/// `VELOC_Init(comm, cfg_file)`: collective mode over `comm`.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Init(comm: MPI_Comm, cfg_file: *const c_char) -> c_int {
    const CALL: &str = "VELOC_Init";
    if !mpi_initialized() {
        return fail(CALL, "MPI is not initialized");
    }
    if comm == abi::MPI_COMM_NULL {
        return fail(CALL, "comm is MPI_COMM_NULL");
    }
    let mut rank: c_int = -1;
    // SAFETY: `rank` is a local.
    if unsafe { crate::comm::PMPI_Comm_rank(comm, &mut rank) } != abi::MPI_SUCCESS || rank < 0 {
        return fail(CALL, "comm is not a valid communicator");
    }
    install(CALL, initialize(Some(comm), rank as u32, cfg_file))
}

/// `VELOC_Init_single(id, cfg_file)`: one process, no communicator; `id`
/// names its files in place of a rank.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Init_single(id: c_uint, cfg_file: *const c_char) -> c_int {
    install("VELOC_Init_single", initialize(None, id, cfg_file))
}

/// `VELOC_Finalize(cleanup)`: checkpoints are written synchronously, so
/// there is nothing to drain; the client's state goes.
#[no_mangle]
pub extern "C" fn VELOC_Finalize(_cleanup: c_int) -> c_int {
    let mut guard = CLIENT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    match guard.take() {
        Some(_) => VELOC_SUCCESS,
        None => fail("VELOC_Finalize", "VeloC is not initialized"),
    }
}

/// `VELOC_Mem_protect(id, ptr, count, base_size)`; protecting an id again
/// replaces its region, as VeloC does.
#[no_mangle]
pub extern "C" fn VELOC_Mem_protect(
    id: c_int,
    ptr: *mut c_void,
    count: usize,
    base_size: usize,
) -> c_int {
    with_client("VELOC_Mem_protect", |client| {
        if id == POSITION_REGION_ID {
            return Err(format!("region {id}: reserved for the library"));
        }
        let bytes = count
            .checked_mul(base_size)
            .filter(|&bytes| bytes <= isize::MAX as usize)
            .ok_or_else(|| format!("region {id}: {count} x {base_size} bytes overflows"))?;
        if ptr.is_null() && bytes > 0 {
            return Err(format!("region {id}: ptr is NULL with {bytes} bytes"));
        }
        client.regions.insert(
            id,
            Protected {
                address: ptr as usize,
                bytes,
            },
        );
        Ok(VELOC_SUCCESS)
    })
}

/// `VELOC_Mem_unprotect(id)`.
#[no_mangle]
pub extern "C" fn VELOC_Mem_unprotect(id: c_int) -> c_int {
    with_client("VELOC_Mem_unprotect", |client| {
        client
            .regions
            .remove(&id)
            .map(|_| VELOC_SUCCESS)
            .ok_or_else(|| format!("region {id} is not protected"))
    })
}

/// `VELOC_Mem_clear()`: unprotect every region.
#[no_mangle]
pub extern "C" fn VELOC_Mem_clear() -> c_int {
    with_client("VELOC_Mem_clear", |client| {
        client.regions.clear();
        Ok(VELOC_SUCCESS)
    })
}

fn named_regions_unsupported(call: &str) -> c_int {
    fail(
        call,
        "named regions (a separate checkpoint file per name) are not supported by resmpi; \
         use VELOC_Mem_protect",
    )
}

/// `VELOC_Region_protect`: not supported (fails with a message).
#[no_mangle]
pub extern "C" fn VELOC_Region_protect(
    _id: c_int,
    _ptr: *mut c_void,
    _count: usize,
    _base_size: usize,
    _name: *const c_char,
) -> c_int {
    named_regions_unsupported("VELOC_Region_protect")
}

/// `VELOC_Region_unprotect`: not supported (fails with a message).
#[no_mangle]
pub extern "C" fn VELOC_Region_unprotect(_id: c_int, _name: *const c_char) -> c_int {
    named_regions_unsupported("VELOC_Region_unprotect")
}

/// `VELOC_Region_clear`: not supported (fails with a message).
#[no_mangle]
pub extern "C" fn VELOC_Region_clear(_name: *const c_char) -> c_int {
    named_regions_unsupported("VELOC_Region_clear")
}

/// Which protected ids a selective call covers.
///
/// # Safety
/// `ids` points to `id_count` ints when `mode` is SOME or REST.
unsafe fn selected_ids(
    mode: c_int,
    ids: *const c_int,
    id_count: c_int,
    available: impl Iterator<Item = i32>,
) -> Result<Vec<i32>, String> {
    let listed: Vec<i32> = match mode {
        SELECT_ALL => Vec::new(),
        SELECT_SOME | SELECT_REST => {
            let count = usize::try_from(id_count)
                .map_err(|_| format!("id_count {id_count} is negative"))?;
            if ids.is_null() && count > 0 {
                return Err("ids is NULL with id_count > 0".to_string());
            }
            if count == 0 {
                Vec::new()
            } else {
                // SAFETY: non-null, `count` ints by the caller's contract.
                unsafe { std::slice::from_raw_parts(ids, count) }.to_vec()
            }
        }
        other => {
            return Err(format!(
                "mode {other}: expected ALL (0), SOME (1) or REST (2)"
            ))
        }
    };
    Ok(match mode {
        SELECT_ALL => available.collect(),
        SELECT_SOME => listed,
        _ => available.filter(|id| !listed.contains(id)).collect(),
    })
}

/// `VELOC_Checkpoint_begin(name, version)`.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Checkpoint_begin(name: *const c_char, version: c_int) -> c_int {
    // SAFETY: VeloC's contract: `name` is NUL-terminated.
    let name = unsafe { string_argument(name, "name") };
    with_client("VELOC_Checkpoint_begin", |client| {
        let name = name?;
        let version = checked_name_version(&name, version)?;
        if !matches!(client.phase, Phase::Idle) {
            return Err("a checkpoint or restart phase is already open".to_string());
        }
        client.phase = Phase::Checkpoint {
            name,
            version,
            written: false,
            failed: false,
            position: None,
        };
        Ok(VELOC_SUCCESS)
    })
}

fn write_checkpoint(client: &mut Client, ids: &[i32]) -> Result<(), String> {
    let logs_messages = client.restart_tests.is_some();
    let Phase::Checkpoint {
        name,
        version,
        written,
        failed,
        position,
    } = &mut client.phase
    else {
        return Err("no checkpoint phase is open (call VELOC_Checkpoint_begin)".to_string());
    };
    let mut regions = Vec::with_capacity(ids.len() + 1);
    // Message logging: where the library stands, so that a replacement
    // resumes here (none: it replays from MPI_Init, as without it).
    *position = if logs_messages {
        current_position()
    } else {
        None
    };
    let encoded_position = position.as_ref().map(CheckpointPosition::encode);
    if let Some(bytes) = &encoded_position {
        regions.push(Region {
            id: POSITION_REGION_ID,
            bytes,
        });
    }
    for &id in ids {
        let protected = client.regions.get(&id).ok_or_else(|| {
            *failed = true;
            format!("region {id} is not protected")
        })?;
        let bytes = if protected.bytes == 0 {
            &[][..]
        } else {
            // SAFETY: VeloC's contract: a protected region stays valid and
            // `bytes` long until it is unprotected; checked non-null when
            // protected.
            unsafe { std::slice::from_raw_parts(protected.address as *const u8, protected.bytes) }
        };
        regions.push(Region { id, bytes });
    }
    match client.store.write(name, *version, &regions) {
        Ok(_) => {
            *written = true;
            Ok(())
        }
        Err(error) => {
            *failed = true;
            Err(format!(
                "writing {}: {error}",
                client.store.path(name, *version).display()
            ))
        }
    }
}

/// `VELOC_Checkpoint_selective(mode, ids, id_count)`: write the selected
/// regions as this phase's checkpoint file.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Checkpoint_selective(
    mode: c_int,
    ids: *mut c_int,
    id_count: c_int,
) -> c_int {
    with_client("VELOC_Checkpoint_selective", |client| {
        // SAFETY: VeloC's contract on `ids`.
        let selected =
            unsafe { selected_ids(mode, ids, id_count, client.regions.keys().copied()) }?;
        write_checkpoint(client, &selected)?;
        Ok(VELOC_SUCCESS)
    })
}

/// `VELOC_Checkpoint_mem()`: every protected region.
#[no_mangle]
pub extern "C" fn VELOC_Checkpoint_mem() -> c_int {
    with_client("VELOC_Checkpoint_mem", |client| {
        let all: Vec<i32> = client.regions.keys().copied().collect();
        write_checkpoint(client, &all)?;
        Ok(VELOC_SUCCESS)
    })
}

/// `VELOC_Checkpoint_end(success)`: closes the phase. A phase with no
/// `_mem` call still leaves a (region-less) file, so a checkpoint made of
/// routed files is found by `VELOC_Restart_test`.
#[no_mangle]
pub extern "C" fn VELOC_Checkpoint_end(success: c_int) -> c_int {
    with_client("VELOC_Checkpoint_end", |client| {
        if !matches!(client.phase, Phase::Checkpoint { .. }) {
            return Err("no checkpoint phase is open".to_string());
        }
        if success != 0 {
            if let Phase::Checkpoint {
                written: false,
                failed: false,
                ..
            } = client.phase
            {
                write_checkpoint(client, &[])?;
            }
        }
        let phase = std::mem::replace(&mut client.phase, Phase::Idle);
        let Phase::Checkpoint {
            name,
            failed,
            position,
            ..
        } = phase
        else {
            unreachable!("checked above")
        };
        if success == 0 {
            return Err("the application reported the checkpoint failed".to_string());
        }
        if failed {
            return Err("the checkpoint was not written".to_string());
        }
        client
            .store
            .prune(&name, client.max_versions)
            .map_err(|error| format!("max_versions: removing old versions: {error}"))?;
        if let Some(position) = position {
            // Durable now: the peers may drop what it covers.
            announce_position(&position);
        }
        Ok(VELOC_SUCCESS)
    })
}

/// `VELOC_Checkpoint_wait()`: checkpoints are synchronous; nothing waits.
#[no_mangle]
pub extern "C" fn VELOC_Checkpoint_wait() -> c_int {
    with_client("VELOC_Checkpoint_wait", |_| Ok(VELOC_SUCCESS))
}

/// `VELOC_Checkpoint_finished()`: 1, no checkpoint is ever in flight.
#[no_mangle]
pub extern "C" fn VELOC_Checkpoint_finished() -> c_int {
    with_client("VELOC_Checkpoint_finished", |_| Ok(1))
}

/// `VELOC_Checkpoint(name, version)`: wait, begin, mem, end.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Checkpoint(name: *const c_char, version: c_int) -> c_int {
    // SAFETY: passed on under the same contract.
    if unsafe { VELOC_Checkpoint_begin(name, version) } != VELOC_SUCCESS {
        return VELOC_FAILURE;
    }
    let written = VELOC_Checkpoint_mem();
    let ended = VELOC_Checkpoint_end((written == VELOC_SUCCESS) as c_int);
    if written == VELOC_SUCCESS && ended == VELOC_SUCCESS {
        VELOC_SUCCESS
    } else {
        VELOC_FAILURE
    }
}

/// One `MPI_Allreduce(MIN)` of `value` over the client's communicator.
fn allreduce_min(comm: MPI_Comm, value: c_int) -> Result<c_int, String> {
    let mut minimum: c_int = 0;
    // SAFETY: one int in, one int out, both locals.
    let code = unsafe {
        crate::coll::PMPI_Allreduce(
            &value as *const c_int as *const c_void,
            &mut minimum as *mut c_int as *mut c_void,
            1,
            abi::MPI_INT,
            abi::MPI_MIN,
            comm,
        )
    };
    if code != abi::MPI_SUCCESS {
        return Err(format!("MPI_Allreduce failed (error {code})"));
    }
    Ok(minimum)
}

/// The newest version at or below `bound` that every rank of `comm` has
/// intact, and how many rounds that took. Each round every rank offers
/// its newest intact version at or below the bound and the minimum
/// becomes the bound; it stops when the minimum is the bound (every rank
/// has it) or some rank has none. VeloC takes one `MPI_Allreduce`; the
/// extra rounds only happen when ranks' newest versions differ, and make
/// sure no rank is told to load a version it does not have.
fn agree_on_version(
    client: &Client,
    name: &str,
    needed: Option<u32>,
) -> Result<(c_int, u32), String> {
    let mut bound = needed;
    let mut rounds = 0;
    loop {
        let (own, refusals) = client.store.latest_intact(name, bound);
        if rounds == 0 {
            for refusal in refusals {
                // The reason names the file.
                eprintln!("VELOC_Restart_test: refusing {}", refusal.reason);
            }
        }
        let own = own.map_or(VELOC_FAILURE, |version| version as c_int);
        let Some(comm) = client.comm else {
            return Ok((own, 1));
        };
        let minimum = allreduce_min(comm, own)?;
        rounds += 1;
        if minimum < 0 || bound == Some(minimum as u32) {
            return Ok((minimum.max(VELOC_FAILURE), rounds));
        }
        bound = Some(minimum as u32);
    }
}

/// `VELOC_Restart_test(name, needed_version)`: the newest version at or
/// below `needed_version` (any when 0) that every rank of VELOC_Init's
/// communicator has intact, or `VELOC_FAILURE`.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Restart_test(name: *const c_char, needed_version: c_int) -> c_int {
    // SAFETY: VeloC's contract: `name` is NUL-terminated.
    let name = unsafe { string_argument(name, "name") };
    with_client("VELOC_Restart_test", |client| {
        let name = name?;
        let needed = checked_name_version(&name, needed_version)?;
        let ordinal = RESTART_TEST_COUNT.fetch_add(1, Ordering::Relaxed);
        if let Some(resume) = lock_resume().as_ref() {
            // This replacement resumes from its own checkpoint's position
            // (chosen at MPI_Init): no agreement, whose rounds are before
            // that position, and no record (the original's stands).
            if resume.name != name || (needed > 0 && resume.version > needed) {
                return Err(format!(
                    "this restarted rank resumes from checkpoint {} version {} (message logging), \
                     but the program asks for {name} at or below {needed}",
                    resume.name, resume.version
                ));
            }
            return Ok(resume.version as c_int);
        }
        let recorded = client
            .restart_tests
            .as_ref()
            .and_then(|log| log.get(ordinal))
            .filter(|test| test.name == name)
            .cloned();
        if let Some(recorded) = recorded {
            // A replay: the same rounds, the recorded answer.
            if let Some(comm) = client.comm {
                for _ in 0..recorded.rounds {
                    allreduce_min(comm, recorded.answer)?;
                }
            }
            return Ok(recorded.answer);
        }
        let (answer, rounds) = agree_on_version(client, &name, (needed > 0).then_some(needed))?;
        if let Some(log) = client.restart_tests.as_mut() {
            // The other ranks have the agreed answer already: failing here
            // would send this rank another way than theirs. Only a later
            // replay of this call is at risk, and stderr says so.
            if let Err(error) = log.record(RestartTest {
                ordinal,
                rounds,
                answer,
                name,
            }) {
                eprintln!(
                    "VELOC_Restart_test: warning: the answer could not be recorded for \
                     message-logging replay ({error}); a restart of this rank may replay \
                     this call differently"
                );
            }
        }
        Ok(answer)
    })
}

/// `VELOC_Restart_begin(name, version)`: read and check this rank's file.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Restart_begin(name: *const c_char, version: c_int) -> c_int {
    // SAFETY: VeloC's contract: `name` is NUL-terminated.
    let name = unsafe { string_argument(name, "name") };
    with_client("VELOC_Restart_begin", |client| {
        let name = name?;
        let version = checked_name_version(&name, version)?;
        if !matches!(client.phase, Phase::Idle) {
            return Err("a checkpoint or restart phase is already open".to_string());
        }
        let checkpoint = client.store.read(&name, version)?;
        client.phase = Phase::Restart {
            name,
            version,
            checkpoint,
        };
        Ok(VELOC_SUCCESS)
    })
}

/// `VELOC_Recover_selective(mode, ids, id_count)`: copy saved regions
/// into the protected ones; a size that differs is an error (nothing is
/// written past a region).
#[no_mangle]
pub unsafe extern "C" fn VELOC_Recover_selective(
    mode: c_int,
    ids: *mut c_int,
    id_count: c_int,
) -> c_int {
    with_client("VELOC_Recover_selective", |client| {
        let Phase::Restart {
            checkpoint,
            name,
            version,
        } = &client.phase
        else {
            return Err("no restart phase is open (call VELOC_Restart_begin)".to_string());
        };
        let saved = (checkpoint.regions.iter())
            .map(|(id, _)| *id)
            .filter(|&id| id != POSITION_REGION_ID);
        // SAFETY: VeloC's contract on `ids`.
        let selected = unsafe { selected_ids(mode, ids, id_count, saved) }?;
        // Check everything before writing anything.
        let mut copies = Vec::with_capacity(selected.len());
        for id in selected {
            let bytes = checkpoint
                .region(id)
                .ok_or_else(|| format!("checkpoint {name} version {version} has no region {id}"))?;
            let protected = client
                .regions
                .get(&id)
                .ok_or_else(|| format!("region {id} is not protected"))?;
            if protected.bytes != bytes.len() {
                return Err(format!(
                    "region {id}: protected with {} bytes, saved with {}",
                    protected.bytes,
                    bytes.len()
                ));
            }
            copies.push((*protected, bytes));
        }
        for (protected, bytes) in copies {
            if !bytes.is_empty() {
                // SAFETY: VeloC's contract: the protected region is valid
                // for `protected.bytes` bytes, equal to `bytes.len()`.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        protected.address as *mut u8,
                        bytes.len(),
                    )
                };
            }
        }
        Ok(VELOC_SUCCESS)
    })
}

/// `VELOC_Recover_mem()`: every region of the checkpoint.
#[no_mangle]
pub extern "C" fn VELOC_Recover_mem() -> c_int {
    // SAFETY: mode ALL reads no ids.
    unsafe { VELOC_Recover_selective(SELECT_ALL, std::ptr::null_mut(), 0) }
}

/// `VELOC_Recover_size(id)`: bytes saved under `id` in the open restart,
/// or -1.
#[no_mangle]
pub extern "C" fn VELOC_Recover_size(id: c_int) -> c_int {
    with_client("VELOC_Recover_size", |client| match &client.phase {
        Phase::Restart { checkpoint, .. } => Ok(checkpoint
            .region(id)
            .and_then(|bytes| c_int::try_from(bytes.len()).ok())
            .unwrap_or(-1)),
        _ => Err("no restart phase is open (call VELOC_Restart_begin)".to_string()),
    })
}

/// `VELOC_Restart_end(success)`.
#[no_mangle]
pub extern "C" fn VELOC_Restart_end(success: c_int) -> c_int {
    with_client("VELOC_Restart_end", |client| {
        if !matches!(client.phase, Phase::Restart { .. }) {
            return Err("no restart phase is open".to_string());
        }
        let phase = std::mem::replace(&mut client.phase, Phase::Idle);
        if success == 0 {
            return Err("the application reported the restart failed".to_string());
        }
        if let Phase::Restart { name, version, .. } = phase {
            finish_resume(&name, version)?;
        }
        Ok(VELOC_SUCCESS)
    })
}

/// `VELOC_Restart(name, version)`: begin, recover all, end.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Restart(name: *const c_char, version: c_int) -> c_int {
    // SAFETY: passed on under the same contract.
    if unsafe { VELOC_Restart_begin(name, version) } != VELOC_SUCCESS {
        return VELOC_FAILURE;
    }
    let recovered = VELOC_Recover_mem();
    let ended = VELOC_Restart_end((recovered == VELOC_SUCCESS) as c_int);
    if recovered == VELOC_SUCCESS && ended == VELOC_SUCCESS {
        VELOC_SUCCESS
    } else {
        VELOC_FAILURE
    }
}

/// `VELOC_Route_file(original, routed)`: inside a checkpoint or restart
/// phase, the path in the checkpoint directory where the phase's copy of
/// `original` lives (`NAME-RANK-VERSION-BASENAME`). Routed files are the
/// application's: not checksummed, not written atomically by resmpi.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Route_file(original: *const c_char, routed: *mut c_char) -> c_int {
    // SAFETY: VeloC's contract: `original` is NUL-terminated.
    let original = unsafe { string_argument(original, "original") };
    with_client("VELOC_Route_file", |client| {
        let original = original?;
        if routed.is_null() {
            return Err("routed is NULL".to_string());
        }
        let (name, version) = match &client.phase {
            Phase::Checkpoint { name, version, .. } | Phase::Restart { name, version, .. } => {
                (name, *version)
            }
            Phase::Idle => return Err("no checkpoint or restart phase is open".to_string()),
        };
        let base = std::path::Path::new(&original)
            .file_name()
            .ok_or_else(|| format!("'{original}' names no file"))?
            .to_string_lossy()
            .into_owned();
        let stem = client.store.path(name, version);
        let path = format!("{}-{base}", stem.with_extension("").display());
        if path.len() + 1 > VELOC_MAX_NAME || path.as_bytes().contains(&0) {
            return Err(format!(
                "routed path longer than VELOC_MAX_NAME ({VELOC_MAX_NAME})"
            ));
        }
        // SAFETY: VeloC's contract: `routed` holds VELOC_MAX_NAME bytes;
        // checked above that the path and its NUL fit.
        unsafe {
            std::ptr::copy_nonoverlapping(path.as_ptr(), routed as *mut u8, path.len());
            *routed.add(path.len()) = 0;
        }
        Ok(VELOC_SUCCESS)
    })
}

/// `VELOC_Cleanup(name)`: remove this rank's versions of `name`.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Cleanup(name: *const c_char) -> c_int {
    // SAFETY: VeloC's contract: `name` is NUL-terminated.
    let name = unsafe { string_argument(name, "name") };
    with_client("VELOC_Cleanup", |client| {
        let name = name?;
        checked_name_version(&name, 0)?;
        client
            .store
            .remove_all(&name)
            .map_err(|error| error.to_string())?;
        Ok(VELOC_SUCCESS)
    })
}

/// Message logging: the checkpoint a replacement resumes from, chosen at
/// `MPI_Init` ([`resume_at_init`]) and finished by `VELOC_Restart`.
struct Resume {
    name: String,
    version: u32,
    position: CheckpointPosition,
}

static RESUME: Mutex<Option<Resume>> = Mutex::new(None);

fn lock_resume() -> std::sync::MutexGuard<'static, Option<Resume>> {
    RESUME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `RESMPI_MSGLOG_RESUME=off`: checkpoints save no position (so nothing
/// is trimmed) and a replacement always replays from `MPI_Init`.
/// Without `--ckpt-dir` (`RESMPI_CKPT_DIR`) neither happens either: a
/// replacement looks for its checkpoint at `MPI_Init`, before the program
/// names its cfg file, so a position saved elsewhere could not be found,
/// and the peers must keep their whole logs for a replay from `MPI_Init`.
fn resume_enabled() -> bool {
    std::env::var_os(CHECKPOINT_DIRECTORY_VARIABLE).is_some()
        && !matches!(
            std::env::var("RESMPI_MSGLOG_RESUME").as_deref(),
            Ok("off" | "0" | "no")
        )
}

/// How long a checkpoint waits for its position when the protocol says one
/// may come (optimistic logging: the stable vector, usually one `fdatasync`
/// of the event logger away).
const POSITION_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// This process's position now, if a replacement could resume from it.
fn current_position() -> Option<CheckpointPosition> {
    if !resume_enabled() {
        return None;
    }
    let job = std::env::var("RESMPI_JOB_ID").unwrap_or_default();
    let mut position =
        crate::global::with_mpi("VELOC_Checkpoint", abi::MPI_COMM_WORLD, |mpi, _| {
            Ok(mpi
                .engine
                .checkpoint_position_waiting(&job, POSITION_WAIT)
                .ok())
        })
        .ok()
        .flatten()?;
    position.output_bytes = crate::output_position::passed_bytes().unwrap_or(u64::MAX);
    Some(position)
}

fn announce_position(position: &CheckpointPosition) {
    let _ = crate::global::with_mpi("VELOC_Checkpoint", abi::MPI_COMM_WORLD, |mpi, _| {
        mpi.engine.announce_checkpoint(position);
        Ok(())
    });
}

/// The newest checkpoint of `rank` in `directory` that holds a position of
/// job `job` for `size` ranks: (name, version, position). The newest is
/// the one furthest along (positions only grow within a job).
fn newest_position(
    directory: &str,
    rank: u32,
    job: &str,
    size: usize,
) -> Option<(String, u32, CheckpointPosition)> {
    let store = CheckpointStore::new(directory, rank);
    let mut best: Option<(u128, String, u32, CheckpointPosition)> = None;
    for (name, version) in store.all_checkpoints().ok()? {
        // A damaged file is skipped (the next older one may do).
        let Ok(checkpoint) = store.read(&name, version) else {
            continue;
        };
        let Some(bytes) = checkpoint.region(POSITION_REGION_ID) else {
            continue;
        };
        let Ok(position) = CheckpointPosition::decode(bytes) else {
            continue;
        };
        if position.job != job || position.delivered.len() != size {
            continue;
        }
        let reach: u128 = (position.delivered.iter().chain(&position.sent))
            .map(|&n| u128::from(n))
            .sum();
        let key = (reach << 32) | u128::from(version);
        if best.as_ref().is_none_or(|(best_key, ..)| key > *best_key) {
            best = Some((key, name, version, position));
        }
    }
    best.map(|(_, name, version, position)| (name, version, position))
}

/// `MPI_Init` of a replacement under message logging (called before
/// anything from the peers is read): if its checkpoint directory holds a
/// checkpoint of this job with a position, resume from it: the engine
/// takes the position now (the peers' re-sends at or below it are
/// dropped), `VELOC_Restart_test` answers its version, and
/// `VELOC_Restart` finishes the jump. Its standard output is muted until
/// then (what it prints before its restart the original never printed),
/// and copied and counted in every process (`output_position`).
pub(crate) fn resume_at_init(mpi: &mut resmpi_core::Mpi) {
    if !resmpi_core::engine::logs_messages(&mpi.engine) {
        return;
    }
    // Optimistic logging holds output that rests on unstable
    // determinants (output commit): the copy runs for it too.
    let optimistic = mpi.config.msglog == resmpi_core::MessageLogging::Optimistic;
    if !resume_enabled() && !optimistic {
        return;
    }
    let resuming = resume_enabled() && resume_choice(mpi);
    if crate::output_position::start(resuming) {
        mpi.engine.set_output_gate(crate::output_position::hold);
    }
}

/// [`resume_at_init`]'s choice: true if this replacement resumes.
fn resume_choice(mpi: &mut resmpi_core::Mpi) -> bool {
    if mpi.config.incarnation == 0 {
        return false;
    }
    let Ok(directory) = std::env::var(CHECKPOINT_DIRECTORY_VARIABLE) else {
        return false;
    };
    let job = mpi.config.job_id.clone().unwrap_or_default();
    let size = mpi.engine.state.size as usize;
    let Some((name, version, position)) =
        newest_position(&directory, mpi.engine.state.rank, &job, size)
    else {
        return false;
    };
    if let Err(reason) = mpi.engine.resume_from(&position) {
        eprintln!("resmpi: not resuming from checkpoint {name} version {version}: {reason}");
        return false;
    }
    *lock_resume() = Some(Resume {
        name,
        version,
        position,
    });
    true
}

/// `VELOC_Restart` of version `version` of `name` succeeded: if this is
/// the resume chosen at `MPI_Init`, set the collective counters and give
/// the application its output back.
fn finish_resume(name: &str, version: u32) -> Result<(), String> {
    let mut guard = lock_resume();
    let Some(resume) = guard.as_ref() else {
        return Ok(());
    };
    if resume.name != name || resume.version != version {
        return Err(format!(
            "this restarted rank resumes from checkpoint {} version {} (message logging), \
             but the program restarts from {name} version {version}",
            resume.name, resume.version
        ));
    }
    let resume = guard.take().expect("checked");
    drop(guard);
    let position = resume.position;
    let _ = crate::global::with_mpi("VELOC_Restart", abi::MPI_COMM_WORLD, |mpi, _| {
        mpi.engine.resume_collectives(&position);
        Ok(())
    });
    // What the original showed up to its checkpoint: the launcher skips
    // it (with what the original showed after), so it is filler here.
    let shown = position.output_bytes;
    crate::output_position::unmute_at(if shown == u64::MAX { 0 } else { shown });
    Ok(())
}
