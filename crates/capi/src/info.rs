//! Info objects (ordered key/value strings), the hints of a communicator
//! (MPI_Comm_set_info / get_info: kept and handed back, none changes
//! behaviour yet), and MPI_INFO_ENV, a read-only info describing how the
//! job was started. Errors go to MPI_COMM_WORLD's handler. The Info
//! functions work before MPI_Init and after MPI_Finalize too (MPI-4).

use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;
use crate::global::out_pointer;
use crate::global::{entry, registry_entry, Registry};
use crate::handles::{info_handle, info_index};
use crate::init::{c_text, write_string};
use crate::objects::{insert_reusing, InfoEntries};
use crate::p2p::comm_of;

/// MPI_INFO_ENV's keys: the standard's `command`, `maxprocs`, `wdir` and
/// `mpi_initial_errhandler`.
fn environment_info(world_size: u32) -> InfoEntries {
    let mut entries = Vec::new();
    if let Some(command) = std::env::args().next() {
        entries.push(("command".to_string(), command));
    }
    entries.push(("maxprocs".to_string(), world_size.to_string()));
    if let Ok(directory) = std::env::current_dir() {
        entries.push(("wdir".to_string(), directory.display().to_string()));
    }
    if let Ok((_, name)) = crate::init::initial_errhandler() {
        entries.push(("mpi_initial_errhandler".to_string(), name.to_string()));
    }
    entries
}

/// A copy of the entries of info `handle` (MPI_INFO_ENV included).
fn info_entries(registry: &Registry, world_size: u32, handle: MPI_Info) -> MpiResult<InfoEntries> {
    if handle == MPI_INFO_ENV {
        return Ok(environment_info(world_size));
    }
    info_index(handle)
        .and_then(|index| registry.objects.infos.get(index).cloned().flatten())
        .ok_or_else(|| invalid_info(handle))
}

/// MPI_INFO_NULL is MPI_ERR_ARG (as in MPICH), any other bad handle MPI_ERR_INFO.
fn invalid_info(handle: MPI_Info) -> MpiError {
    if handle == MPI_INFO_NULL {
        return MpiError::new(ErrorClass::Arg, "info is MPI_INFO_NULL");
    }
    MpiError::new(
        ErrorClass::Info,
        format!("info {handle:#x} is not valid (freed, read-only or never created)"),
    )
}

/// The entries of a user info object, for changing them.
fn info_entries_mut(registry: &mut Registry, handle: MPI_Info) -> MpiResult<&mut InfoEntries> {
    info_index(handle)
        .and_then(|index| registry.objects.infos.get_mut(index))
        .and_then(Option::as_mut)
        .ok_or_else(|| invalid_info(handle))
}

/// A key from C: non-empty, at most MPI_MAX_INFO_KEY characters.
unsafe fn info_key(key: *const c_char) -> MpiResult<String> {
    if key.is_null() {
        return Err(MpiError::new(ErrorClass::InfoKey, "info key is NULL"));
    }
    // SAFETY: checked non-null; a C string.
    let text = unsafe { c_text(key) };
    if text.is_empty() || text.len() > MPI_MAX_INFO_KEY as usize {
        return Err(MpiError::new(
            ErrorClass::InfoKey,
            format!(
                "info key of {} characters (1..={MPI_MAX_INFO_KEY} allowed)",
                text.len()
            ),
        ));
    }
    Ok(text)
}

/// The value of `key` in user info `handle` (None for MPI_INFO_NULL or a
/// missing key), for hints read by other entry points.
pub(crate) fn hint(registry: &Registry, handle: MPI_Info, key: &str) -> MpiResult<Option<String>> {
    if handle == MPI_INFO_NULL {
        return Ok(None);
    }
    let entries = info_index(handle)
        .and_then(|index| registry.objects.infos.get(index))
        .and_then(Option::as_ref)
        .ok_or_else(|| invalid_info(handle))?;
    Ok(entries
        .iter()
        .find(|(other, _)| other == key)
        .map(|(_, value)| value.clone()))
}

/// Set `key` to `value` in user info `handle` (an info argument the call
/// writes back, as MPI_Comm_split_type's with MPI_COMM_TYPE_HW_UNGUIDED).
pub(crate) fn set_hint(
    registry: &mut Registry,
    handle: MPI_Info,
    key: &str,
    value: &str,
) -> MpiResult<()> {
    let entries = info_entries_mut(registry, handle)?;
    match entries.iter_mut().find(|(other, _)| other == key) {
        Some(entry) => entry.1 = value.to_string(),
        None => entries.push((key.to_string(), value.to_string())),
    }
    Ok(())
}

pub(crate) fn new_info(registry: &mut Registry, entries: InfoEntries) -> MPI_Info {
    info_handle(insert_reusing(&mut registry.objects.infos, entries))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_create(info: *mut MPI_Info) -> c_int {
    registry_entry("MPI_Info_create", |_, registry| {
        out_pointer(info, "info")?;
        // SAFETY: checked non-null.
        unsafe { *info = new_info(registry, Vec::new()) };
        Ok(())
    })
}
const _: fn_types::MPI_Info_create = PMPI_Info_create;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_free(info: *mut MPI_Info) -> c_int {
    registry_entry("MPI_Info_free", |_, registry| {
        out_pointer(info, "info")?;
        // SAFETY: checked non-null.
        let handle = unsafe { *info };
        info_entries_mut(registry, handle)?;
        registry.objects.infos[info_index(handle).expect("a live info")] = None;
        // SAFETY: checked non-null.
        unsafe { *info = MPI_INFO_NULL };
        Ok(())
    })
}
const _: fn_types::MPI_Info_free = PMPI_Info_free;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_dup(info: MPI_Info, newinfo: *mut MPI_Info) -> c_int {
    registry_entry("MPI_Info_dup", |world_size, registry| {
        let entries = info_entries(registry, world_size, info)?;
        out_pointer(newinfo, "newinfo")?;
        // SAFETY: checked non-null.
        unsafe { *newinfo = new_info(registry, entries) };
        Ok(())
    })
}
const _: fn_types::MPI_Info_dup = PMPI_Info_dup;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_set(
    info: MPI_Info,
    key: *const c_char,
    value: *const c_char,
) -> c_int {
    registry_entry("MPI_Info_set", |_, registry| {
        let entries = info_entries_mut(registry, info)?;
        // SAFETY: the caller's C string.
        let key = unsafe { info_key(key) }?;
        if value.is_null() {
            return Err(MpiError::new(ErrorClass::InfoValue, "info value is NULL"));
        }
        // SAFETY: checked non-null; a C string.
        let value = unsafe { c_text(value) };
        if value.len() > MPI_MAX_INFO_VAL as usize {
            return Err(MpiError::new(
                ErrorClass::InfoValue,
                format!(
                    "info value of {} characters (at most {MPI_MAX_INFO_VAL})",
                    value.len()
                ),
            ));
        }
        match entries.iter_mut().find(|(other, _)| *other == key) {
            Some(entry) => entry.1 = value,
            None => entries.push((key, value)),
        }
        Ok(())
    })
}
const _: fn_types::MPI_Info_set = PMPI_Info_set;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_delete(info: MPI_Info, key: *const c_char) -> c_int {
    registry_entry("MPI_Info_delete", |_, registry| {
        let entries = info_entries_mut(registry, info)?;
        // SAFETY: the caller's C string.
        let key = unsafe { info_key(key) }?;
        let Some(position) = entries.iter().position(|(other, _)| *other == key) else {
            return Err(MpiError::new(
                ErrorClass::InfoNokey,
                format!("info key '{key}' is not set"),
            ));
        };
        entries.remove(position);
        Ok(())
    })
}
const _: fn_types::MPI_Info_delete = PMPI_Info_delete;

/// The value of `key` in `info`, if set.
fn lookup(
    name: &str,
    info: MPI_Info,
    key: *const c_char,
    body: impl FnOnce(Option<&str>) -> MpiResult<()>,
) -> c_int {
    registry_entry(name, |world_size, registry| {
        let entries = info_entries(registry, world_size, info)?;
        // SAFETY: the caller's C string.
        let key = unsafe { info_key(key) }?;
        let value = entries
            .iter()
            .find(|(other, _)| *other == key)
            .map(|(_, value)| value.as_str());
        body(value)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_get(
    info: MPI_Info,
    key: *const c_char,
    valuelen: c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    lookup("MPI_Info_get", info, key, |found| {
        out_pointer(flag, "flag")?;
        if valuelen < 0 {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!("valuelen {valuelen} is negative"),
            ));
        }
        if let Some(text) = found {
            out_pointer(value, "value")?;
            // SAFETY: MPI: the buffer holds valuelen characters plus the NUL.
            unsafe { write_string(text, value, valuelen as usize + 1, std::ptr::null_mut()) };
        }
        // SAFETY: checked non-null.
        unsafe { *flag = found.is_some() as c_int };
        Ok(())
    })
}
const _: fn_types::MPI_Info_get = PMPI_Info_get;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_get_valuelen(
    info: MPI_Info,
    key: *const c_char,
    valuelen: *mut c_int,
    flag: *mut c_int,
) -> c_int {
    lookup("MPI_Info_get_valuelen", info, key, |found| {
        out_pointer(flag, "flag")?;
        out_pointer(valuelen, "valuelen")?;
        // SAFETY: checked non-null.
        unsafe {
            *flag = found.is_some() as c_int;
            if let Some(text) = found {
                *valuelen = text.len() as c_int;
            }
        }
        Ok(())
    })
}
const _: fn_types::MPI_Info_get_valuelen = PMPI_Info_get_valuelen;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_get_string(
    info: MPI_Info,
    key: *const c_char,
    buflen: *mut c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    lookup("MPI_Info_get_string", info, key, |found| {
        out_pointer(flag, "flag")?;
        out_pointer(buflen, "buflen")?;
        // SAFETY: checked non-null.
        let capacity = unsafe { *buflen };
        if let Some(text) = found {
            if capacity > 0 {
                out_pointer(value, "value")?;
                // SAFETY: the caller's buffer holds buflen bytes.
                unsafe { write_string(text, value, capacity as usize, std::ptr::null_mut()) };
            }
            // SAFETY: checked non-null.
            unsafe { *buflen = text.len() as c_int + 1 };
        }
        // SAFETY: checked non-null.
        unsafe { *flag = found.is_some() as c_int };
        Ok(())
    })
}
const _: fn_types::MPI_Info_get_string = PMPI_Info_get_string;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_get_nkeys(info: MPI_Info, nkeys: *mut c_int) -> c_int {
    registry_entry("MPI_Info_get_nkeys", |world_size, registry| {
        let entries = info_entries(registry, world_size, info)?;
        out_pointer(nkeys, "nkeys")?;
        // SAFETY: checked non-null.
        unsafe { *nkeys = entries.len() as c_int };
        Ok(())
    })
}
const _: fn_types::MPI_Info_get_nkeys = PMPI_Info_get_nkeys;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_get_nthkey(info: MPI_Info, n: c_int, key: *mut c_char) -> c_int {
    registry_entry("MPI_Info_get_nthkey", |world_size, registry| {
        let entries = info_entries(registry, world_size, info)?;
        let Some((text, _)) = usize::try_from(n).ok().and_then(|n| entries.get(n)) else {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!("key number {n} is out of range ({} keys)", entries.len()),
            ));
        };
        out_pointer(key, "key")?;
        // SAFETY: MPI: the buffer holds MPI_MAX_INFO_KEY characters plus the NUL.
        unsafe {
            write_string(
                text,
                key,
                MPI_MAX_INFO_KEY as usize + 1,
                std::ptr::null_mut(),
            )
        };
        Ok(())
    })
}
const _: fn_types::MPI_Info_get_nthkey = PMPI_Info_get_nthkey;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_set_info(comm: MPI_Comm, info: MPI_Info) -> c_int {
    entry("MPI_Comm_set_info", comm, |mpi, registry| {
        let index = comm_of(mpi, comm)?;
        let entries = info_entries(registry, mpi.replicas.ranks, info)?;
        registry.objects.comm_infos.insert(index, entries);
        Ok(())
    })
}
const _: fn_types::MPI_Comm_set_info = PMPI_Comm_set_info;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_get_info(comm: MPI_Comm, info_used: *mut MPI_Info) -> c_int {
    entry("MPI_Comm_get_info", comm, |mpi, registry| {
        let index = comm_of(mpi, comm)?;
        out_pointer(info_used, "info_used")?;
        let entries = registry
            .objects
            .comm_infos
            .get(&index)
            .cloned()
            .unwrap_or_default();
        // SAFETY: checked non-null.
        unsafe { *info_used = new_info(registry, entries) };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_get_info = PMPI_Comm_get_info;

/// MPI_Info_create_env: a new info with MPI_INFO_ENV's keys, `command` and
/// `argv` taken from the arguments given (when there are any).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_create_env(
    argc: c_int,
    argv: *mut *mut c_char,
    info: *mut MPI_Info,
) -> c_int {
    registry_entry("MPI_Info_create_env", |world_size, registry| {
        out_pointer(info, "info")?;
        let mut entries = environment_info(world_size);
        if argc > 0 && !argv.is_null() {
            // SAFETY: the caller passes `argc` C strings, as main() got them.
            let arguments: Vec<String> = (0..argc as usize)
                .map(|index| unsafe { *argv.add(index) })
                .take_while(|argument| !argument.is_null())
                .map(|argument| {
                    unsafe { std::ffi::CStr::from_ptr(argument) }
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            entries.retain(|(key, _)| key != "command");
            if let Some((command, rest)) = arguments.split_first() {
                entries.insert(0, ("command".to_string(), command.clone()));
                if !rest.is_empty() {
                    entries.insert(1, ("argv".to_string(), rest.join(" ")));
                }
            }
        }
        // SAFETY: checked non-null.
        unsafe { *info = new_info(registry, entries) };
        Ok(())
    })
}
const _: fn_types::MPI_Info_create_env = PMPI_Info_create_env;
