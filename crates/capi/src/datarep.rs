//! MPI_Register_datarep: data representations the application defines for
//! MPI-IO file views, as conversion callbacks between the memory layout of
//! a datatype and its bytes in the file.
//!
//! Why it is small: resmpi's file views place every element at its native
//! size (`crates/io`'s views are byte extents computed from the native
//! layouts), so a user representation is accepted when its
//! `dtype_file_extent_fn` gives every predefined type in the view and in
//! the access its native extent (a byte-order or encoding change, the
//! common case), and refused with MPI_ERR_UNSUPPORTED_DATAREP, naming the
//! type, when a size would change (as for external32's C `long`). Within
//! that, reads and writes call the application's conversion functions on
//! the whole access at once (position 0), and a NULL function
//! (MPI_CONVERSION_FN_NULL) means the bytes are the native ones.
//!
//! Registrations last until the process ends (MPI has no way to remove
//! one); a name is taken once, and the predefined "native", "internal" and
//! "external32" are never free.

use std::ffi::CStr;
use std::sync::Mutex;

use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;
use crate::datatype::{builtin_info, TypeRef};
use crate::global::entry;

/// A conversion function of either count width.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Conversion {
    /// MPI_CONVERSION_FN_NULL: the file holds the native bytes.
    Native,
    /// Registered by MPI_Register_datarep (`int` count).
    Int(
        unsafe extern "C" fn(
            *mut c_void,
            MPI_Datatype,
            c_int,
            *mut c_void,
            MPI_Offset,
            *mut c_void,
        ) -> c_int,
    ),
    /// Registered by MPI_Register_datarep_c (`MPI_Count` count).
    Large(
        unsafe extern "C" fn(
            *mut c_void,
            MPI_Datatype,
            MPI_Count,
            *mut c_void,
            MPI_Offset,
            *mut c_void,
        ) -> c_int,
    ),
}

/// One registered representation.
#[derive(Clone, Debug)]
pub(crate) struct UserDatarep {
    /// Its name, as MPI_File_set_view and MPI_File_get_view spell it.
    pub name: String,
    /// File bytes to memory.
    pub read: Conversion,
    /// Memory to file bytes.
    pub write: Conversion,
    extent: unsafe extern "C" fn(MPI_Datatype, *mut MPI_Aint, *mut c_void) -> c_int,
    extra_state: usize,
}

/// What the conversion of an access is to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// From the application's buffer into file bytes.
    Write,
    /// From file bytes into the application's buffer.
    Read,
}

static DATAREPS: Mutex<Vec<UserDatarep>> = Mutex::new(Vec::new());

/// The representation registered under `name`, with its index.
pub(crate) fn find(name: &str) -> Option<(usize, UserDatarep)> {
    let registered = DATAREPS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    registered
        .iter()
        .position(|datarep| datarep.name == name)
        .map(|index| (index, registered[index].clone()))
}

/// Representation `index` (from [`find`]).
pub(crate) fn get(index: usize) -> UserDatarep {
    DATAREPS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())[index]
        .clone()
}

impl UserDatarep {
    /// MPI_ERR_UNSUPPORTED_DATAREP unless every predefined type `datatype`
    /// is built from has its native extent in this representation (see
    /// the module comment); the extent function's own error is returned
    /// as MPI_ERR_CONVERSION.
    pub(crate) fn check_sizes(&self, datatype: MPI_Datatype, what: &str) -> MpiResult<()> {
        let mut predefined = Vec::new();
        predefined_types(datatype, &mut predefined);
        for handle in predefined {
            let Some(info) = builtin_info(handle) else {
                continue;
            };
            let mut file_extent: MPI_Aint = -1;
            // SAFETY: the application's extent function, called as MPI says
            // (a predefined type, an out pointer, its extra state).
            let code =
                unsafe { (self.extent)(handle, &mut file_extent, self.extra_state as *mut c_void) };
            if code != MPI_SUCCESS {
                return Err(MpiError::new(
                    ErrorClass::Conversion,
                    format!(
                        "the extent function of data representation {:?} returned error code {code} for datatype {handle:#x}",
                        self.name
                    ),
                ));
            }
            if file_extent != info.extent_bytes as MPI_Aint {
                return Err(MpiError::new(
                    ErrorClass::UnsupportedDatarep,
                    format!(
                        "{what}: data representation {:?} gives datatype {handle:#x} a file extent of {file_extent} \
                         bytes, not its {} bytes in memory; resmpi's file views keep every element at its \
                         memory size",
                        self.name, info.extent_bytes
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Convert `count` elements of `datatype` between the application's
    /// buffer at `user` and `file` bytes, as `direction` says; false when
    /// the representation keeps the native bytes (nothing was done).
    ///
    /// # Safety
    /// `user` holds `count` elements of `datatype`; `file` is as long as
    /// their packed bytes.
    pub(crate) unsafe fn convert(
        &self,
        direction: Direction,
        user: *mut u8,
        datatype: MPI_Datatype,
        count: usize,
        file: &mut [u8],
    ) -> MpiResult<bool> {
        let function = match direction {
            Direction::Write => self.write,
            Direction::Read => self.read,
        };
        let (user, file_bytes, extra) = (
            user.cast(),
            file.as_mut_ptr().cast(),
            self.extra_state as *mut c_void,
        );
        let code = match function {
            Conversion::Native => return Ok(false),
            Conversion::Int(function) => {
                let count = c_int::try_from(count).map_err(|_| {
                    MpiError::new(
                        ErrorClass::Count,
                        format!("{count} elements do not fit the int count of a conversion function registered by MPI_Register_datarep (use MPI_Register_datarep_c)"),
                    )
                })?;
                // SAFETY: the application's function on the buffers the
                // caller vouches for, from the start of the access.
                unsafe { function(user, datatype, count, file_bytes, 0, extra) }
            }
            // SAFETY: as above.
            Conversion::Large(function) => unsafe {
                function(user, datatype, count as MPI_Count, file_bytes, 0, extra)
            },
        };
        if code != MPI_SUCCESS {
            return Err(MpiError::new(
                ErrorClass::Conversion,
                format!(
                    "the {} conversion function of data representation {:?} returned error code {code}",
                    match direction {
                        Direction::Write => "write",
                        Direction::Read => "read",
                    },
                    self.name
                ),
            ));
        }
        Ok(true)
    }
}

/// The predefined types `datatype` is made of (itself when predefined).
fn predefined_types(datatype: MPI_Datatype, found: &mut Vec<MPI_Datatype>) {
    if builtin_info(datatype).is_some() {
        if !found.contains(&datatype) {
            found.push(datatype);
        }
        return;
    }
    if let Some(object) = crate::datatype::derived_object(datatype) {
        collect(&object.contents.datatypes, found);
    }
}

fn collect(constituents: &[TypeRef], found: &mut Vec<MPI_Datatype>) {
    for constituent in constituents {
        match constituent {
            TypeRef::Predefined(handle) => {
                if !found.contains(handle) {
                    found.push(*handle);
                }
            }
            TypeRef::Derived(object) => collect(&object.contents.datatypes, found),
        }
    }
}

/// MPI_Register_datarep's work for either count width.
unsafe fn register(
    name: &str,
    datarep: *const c_char,
    read: Conversion,
    write: Conversion,
    extent: MPI_Datarep_extent_function,
    extra_state: *mut c_void,
) -> c_int {
    entry(name, MPI_COMM_WORLD, |_, _| {
        if datarep.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "datarep is NULL"));
        }
        // SAFETY: a non-null C string from the application.
        let bytes = unsafe { CStr::from_ptr(datarep) }.to_bytes();
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Err(MpiError::new(ErrorClass::Arg, "datarep is not UTF-8"));
        };
        if text.is_empty() || bytes.len() >= MPI_MAX_DATAREP_STRING as usize {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!(
                    "datarep {text:?} must have 1 to {} characters",
                    MPI_MAX_DATAREP_STRING - 1
                ),
            ));
        }
        let Some(extent) = extent else {
            return Err(MpiError::new(
                ErrorClass::Arg,
                "dtype_file_extent_fn is NULL (it is required)",
            ));
        };
        let mut registered = DATAREPS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if matches!(text, "native" | "internal" | "external32")
            || registered.iter().any(|known| known.name == text)
        {
            return Err(MpiError::new(
                ErrorClass::DupDatarep,
                format!("data representation {text:?} is already defined"),
            ));
        }
        registered.push(UserDatarep {
            name: text.to_string(),
            read,
            write,
            extent,
            extra_state: extra_state as usize,
        });
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Register_datarep(
    datarep: *const c_char,
    read_conversion_fn: MPI_Datarep_conversion_function,
    write_conversion_fn: MPI_Datarep_conversion_function,
    dtype_file_extent_fn: MPI_Datarep_extent_function,
    extra_state: *mut c_void,
) -> c_int {
    let width = |function: MPI_Datarep_conversion_function| {
        function.map_or(Conversion::Native, Conversion::Int)
    };
    // SAFETY: the application's arguments, checked inside.
    unsafe {
        register(
            "MPI_Register_datarep",
            datarep,
            width(read_conversion_fn),
            width(write_conversion_fn),
            dtype_file_extent_fn,
            extra_state,
        )
    }
}
const _: fn_types::MPI_Register_datarep = PMPI_Register_datarep;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Register_datarep_c(
    datarep: *const c_char,
    read_conversion_fn: MPI_Datarep_conversion_function_c,
    write_conversion_fn: MPI_Datarep_conversion_function_c,
    dtype_file_extent_fn: MPI_Datarep_extent_function,
    extra_state: *mut c_void,
) -> c_int {
    let width = |function: MPI_Datarep_conversion_function_c| {
        function.map_or(Conversion::Native, Conversion::Large)
    };
    // SAFETY: the application's arguments, checked inside.
    unsafe {
        register(
            "MPI_Register_datarep_c",
            datarep,
            width(read_conversion_fn),
            width(write_conversion_fn),
            dtype_file_extent_fn,
            extra_state,
        )
    }
}
const _: fn_types::MPI_Register_datarep_c = PMPI_Register_datarep_c;
