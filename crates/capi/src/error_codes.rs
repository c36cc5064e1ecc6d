//! Error classes and codes the application adds (MPI_Add_error_class,
//! MPI_Add_error_code, MPI_Add_error_string), and the strings it gives
//! them. MPI_Error_class, MPI_Error_string and the MPI_LASTUSEDCODE
//! attribute of MPI_COMM_WORLD read this table.
//!
//! Added classes and codes share one counter above MPI_ERR_LASTCODE, so
//! MPI_LASTUSEDCODE (the largest class) is never below MPI_ERR_LASTCODE,
//! as the standard wants. The table is local to the process
//! and needs no library state, so it has its own lock.
//!
//! Errors the library returns (under MPI_ERRORS_RETURN or to a user
//! handler) are *detailed codes*, as MPICH's are: the class in the low
//! seven bits and a slot of a ring of recent messages above them, so
//! MPI_Error_string gives the sentence that says what was wrong (the one
//! the fatal handler prints), and MPI_Error_class the class.
//! ULFM's three classes are the exception: returned bare, as Open MPI
//! does (see [`BARE_CLASSES`]).

use std::sync::Mutex;

use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;
use crate::global::raise_error;
use crate::init::c_text;

/// One added class or code.
struct Added {
    /// The class: itself for an added class.
    class: c_int,
    /// Whether this is a class (MPI_Add_error_code needs one).
    is_class: bool,
    /// Set by MPI_Add_error_string; empty until then.
    text: String,
}

/// Added classes and codes; entry `i` is value `MPI_ERR_LASTCODE + 1 + i`.
static ADDED: Mutex<Vec<Added>> = Mutex::new(Vec::new());

/// Most classes and codes a process may add: values stay below `c_int::MAX`.
const ADDED_LIMIT_COUNT: usize = 1 << 20;

fn with_added<T>(body: impl FnOnce(&mut Vec<Added>) -> T) -> T {
    let mut guard = ADDED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    body(&mut guard)
}

fn value_of(position: usize) -> c_int {
    MPI_ERR_LASTCODE + 1 + position as c_int
}

fn position_of(value: c_int) -> Option<usize> {
    usize::try_from(value.checked_sub(MPI_ERR_LASTCODE + 1)?).ok()
}

/// Bits of a detailed code that hold its class (MPICH's ERROR_CLASS_MASK).
const CLASS_MASK: c_int = 0x7f;
/// Slots of the ring of recent error messages.
const DETAIL_SLOT_COUNT: usize = 4096;

/// The ring of recent error messages: each slot holds the code it was
/// given out as, so a stale code finds its slot taken and falls back to
/// its class's text.
struct Details {
    slots: Vec<Option<(c_int, String)>>,
    next: usize,
}

static DETAILS: Mutex<Details> = Mutex::new(Details {
    slots: Vec::new(),
    next: 0,
});

/// ULFM's classes (MPIX_ERR_PROC_FAILED, _PROC_FAILED_PENDING, _REVOKED)
/// are returned as the bare class: ULFM programs written for Open MPI
/// (its tutorials and tests) compare `rc == MPIX_ERR_PROC_FAILED` without
/// MPI_Error_class. The text of the latest such error is kept per class
/// for MPI_Error_string.
const BARE_CLASSES: std::ops::RangeInclusive<c_int> = 101..=103;

/// The latest text of each bare class (index: class - 101).
static BARE_TEXTS: Mutex<[Option<String>; 3]> = Mutex::new([None, None, None]);

/// The text of the latest error returned as bare class `class`.
pub fn latest_text_of_bare_class(class: c_int) -> Option<String> {
    if !BARE_CLASSES.contains(&class) {
        return None;
    }
    let texts = BARE_TEXTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    texts[(class - BARE_CLASSES.start()) as usize].clone()
}

/// A code for an error of `class` (a predefined class, below 128) that
/// carries `text`. Falls back to the class itself for other classes (and
/// for ULFM's, see [`BARE_CLASSES`]).
pub fn detailed_code(class: c_int, text: String) -> c_int {
    *LAST_ERROR_TEXT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(text.clone());
    if BARE_CLASSES.contains(&class) {
        let mut texts = BARE_TEXTS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        texts[(class - BARE_CLASSES.start()) as usize] = Some(text);
        return class;
    }
    if !(1..=CLASS_MASK).contains(&class) {
        return class;
    }
    let mut details = DETAILS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if details.slots.is_empty() {
        details.slots.resize(DETAIL_SLOT_COUNT, None);
    }
    let slot = details.next % DETAIL_SLOT_COUNT;
    details.next = details.next.wrapping_add(1);
    let code = class + (CLASS_MASK + 1) * (slot as c_int + 1);
    details.slots[slot] = Some((code, text));
    code
}

/// The text of the last error this process raised (any handler), if any.
pub fn last_error_text() -> Option<String> {
    LAST_ERROR_TEXT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone()
}

/// See [`last_error_text`]: an application that aborts after an error
/// it got back (`MPI_ERRORS_RETURN`) has the error named in the abort, so
/// the cause reaches mpiexec even when this process's own stderr is not
/// shown (a replica that is not the one whose output is printed).
static LAST_ERROR_TEXT: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Class and text of a detailed code (the text empty once its slot was
/// reused); None for values that are not detailed codes.
pub fn detail_of(code: c_int) -> Option<(c_int, String)> {
    let slot = usize::try_from(code / (CLASS_MASK + 1) - 1).ok()?;
    if code <= CLASS_MASK || slot >= DETAIL_SLOT_COUNT {
        return None;
    }
    let class = code & CLASS_MASK;
    crate::init::class_description(class)?;
    let details = DETAILS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let text = match details.slots.get(slot) {
        Some(Some((stored, text))) if *stored == code => text.clone(),
        _ => String::new(),
    };
    Some((class, text))
}

/// The class and string of an added code or class.
pub fn describe(code: c_int) -> Option<(c_int, String)> {
    let position = position_of(code)?;
    with_added(|added| {
        added
            .get(position)
            .map(|entry| (entry.class, entry.text.clone()))
    })
}

/// The MPI_LASTUSEDCODE attribute: the largest error class, added ones
/// included (the standard's definition, and MPICH's value: added codes do
/// not move it).
pub fn last_used_code() -> c_int {
    with_added(|added| {
        added
            .iter()
            .rposition(|entry| entry.is_class)
            .map_or(MPI_ERR_LASTCODE, value_of)
    })
}

fn add(class: Option<c_int>) -> MpiResult<c_int> {
    with_added(|added| {
        if added.len() >= ADDED_LIMIT_COUNT {
            return Err(MpiError::new(
                ErrorClass::Other,
                "too many error classes and codes added",
            ));
        }
        let value = value_of(added.len());
        added.push(Added {
            class: class.unwrap_or(value),
            is_class: class.is_none(),
            text: String::new(),
        });
        Ok(value)
    })
}

/// Store `value` through `out`, or report the error on MPI_COMM_WORLD.
unsafe fn deliver(name: &str, result: MpiResult<c_int>, out: *mut c_int) -> c_int {
    match result {
        Ok(value) => {
            // SAFETY: checked non-null by the callers; the caller's variable.
            unsafe { *out = value };
            MPI_SUCCESS
        }
        Err(error) => raise_error(name, MPI_COMM_WORLD, error),
    }
}

fn null_pointer(what: &str) -> MpiError {
    MpiError::new(ErrorClass::Arg, format!("{what} pointer is NULL"))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Add_error_class(errorclass: *mut c_int) -> c_int {
    let result = if errorclass.is_null() {
        Err(null_pointer("errorclass"))
    } else {
        add(None)
    };
    // SAFETY: checked non-null when the result is a value.
    unsafe { deliver("MPI_Add_error_class", result, errorclass) }
}
const _: fn_types::MPI_Add_error_class = PMPI_Add_error_class;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Add_error_code(errorclass: c_int, errorcode: *mut c_int) -> c_int {
    let is_added_class = position_of(errorclass).is_some_and(|position| {
        with_added(|added| added.get(position).is_some_and(|e| e.is_class))
    });
    let is_predefined_class = (MPI_SUCCESS..=MPI_ERR_LASTCODE).contains(&errorclass)
        && crate::init::class_description(errorclass).is_some();
    let result = if errorcode.is_null() {
        Err(null_pointer("errorcode"))
    } else if !is_added_class && !is_predefined_class {
        Err(MpiError::new(
            ErrorClass::Arg,
            format!("{errorclass} is not an error class"),
        ))
    } else {
        add(Some(errorclass))
    };
    // SAFETY: checked non-null when the result is a value.
    unsafe { deliver("MPI_Add_error_code", result, errorcode) }
}
const _: fn_types::MPI_Add_error_code = PMPI_Add_error_code;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Add_error_string(errorcode: c_int, string: *const c_char) -> c_int {
    let result = if string.is_null() {
        Err(null_pointer("string"))
    } else {
        // SAFETY: checked non-null; a C string.
        let mut text = unsafe { c_text(string) };
        if text.len() >= MPI_MAX_ERROR_STRING as usize {
            let mut end = MPI_MAX_ERROR_STRING as usize - 1;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
        }
        with_added(
            |added| match position_of(errorcode).and_then(|p| added.get_mut(p)) {
                Some(entry) => {
                    entry.text = text;
                    Ok(())
                }
                None => Err(MpiError::new(
                    ErrorClass::Arg,
                    format!("{errorcode} is not an error class or code added by the application"),
                )),
            },
        )
    };
    match result {
        Ok(()) => MPI_SUCCESS,
        Err(error) => raise_error("MPI_Add_error_string", MPI_COMM_WORLD, error),
    }
}
const _: fn_types::MPI_Add_error_string = PMPI_Add_error_string;
