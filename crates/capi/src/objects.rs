//! Local objects the C layer owns for communicators and datatypes: groups,
//! attribute keyvals and values, info objects, datatype names. One struct,
//! one field of the `Registry`, so the rest of the C layer is untouched.
//!
//! Freed group and info slots are reused, as communicator slots are;
//! keyval slots are not, because attributes may outlive the freeing of
//! their keyval and must still find its delete callback.

use std::collections::BTreeMap;
use std::sync::Arc;

use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;

/// An attribute keyval from MPI_Comm_create_keyval (or MPI_Keyval_create).
#[derive(Clone, Copy, Debug)]
pub struct Keyval {
    /// Called on MPI_Comm_dup; None is MPI_COMM_NULL_COPY_FN (not copied).
    pub copy: MPI_Comm_copy_attr_function,
    /// Called when the attribute goes; None is MPI_COMM_NULL_DELETE_FN.
    pub delete: MPI_Comm_delete_attr_function,
    /// The application's extra state, passed back to both callbacks.
    pub extra_state: usize,
    /// Set by MPI_Comm_free_keyval: freeing again is an error.
    pub freed: bool,
}

/// An info object: keys in insertion order (MPI_Info_get_nthkey order).
pub type InfoEntries = Vec<(String, String)>;

/// The tables.
pub struct Objects {
    /// World ranks of each group, by index.
    pub groups: Vec<Option<Arc<Vec<u32>>>>,
    /// User keyvals, by index (never reused).
    pub keyvals: Vec<Keyval>,
    /// Attributes (keyval, value) of each communicator, by table index.
    pub comm_attributes: BTreeMap<usize, Vec<(c_int, usize)>>,
    /// Info objects, by index.
    pub infos: Vec<Option<InfoEntries>>,
    /// Hints set with MPI_Comm_set_info, by communicator table index.
    pub comm_infos: BTreeMap<usize, InfoEntries>,
    /// Names set with MPI_Type_set_name, by datatype handle.
    pub type_names: BTreeMap<MPI_Datatype, String>,
    /// Attributes (keyval, value) of each datatype, by handle.
    pub type_attributes: BTreeMap<MPI_Datatype, Vec<(c_int, usize)>>,
}

impl Objects {
    /// Empty tables.
    pub const fn new() -> Objects {
        Objects {
            groups: Vec::new(),
            keyvals: Vec::new(),
            comm_attributes: BTreeMap::new(),
            infos: Vec::new(),
            comm_infos: BTreeMap::new(),
            type_names: BTreeMap::new(),
            type_attributes: BTreeMap::new(),
        }
    }

    /// Forget everything attached to communicator slot `index` (freed).
    pub fn forget_comm(&mut self, index: usize) {
        self.comm_attributes.remove(&index);
        self.comm_infos.remove(&index);
    }

    /// The user keyval `keyval`. A freed keyval still serves the attributes
    /// set with it, as in MPICH (only freeing it again is an error).
    pub fn keyval(&self, keyval: c_int) -> MpiResult<Keyval> {
        crate::handles::keyval_index(keyval)
            .and_then(|index| self.keyvals.get(index))
            .copied()
            .ok_or_else(|| {
                MpiError::new(
                    ErrorClass::Keyval,
                    format!("keyval {keyval:#x} is not valid (freed, predefined or never created)"),
                )
            })
    }
}

/// Store `value` in the first free slot of `table`, returning its index.
pub fn insert_reusing<T>(table: &mut Vec<Option<T>>, value: T) -> usize {
    match table.iter().position(Option::is_none) {
        Some(index) => {
            table[index] = Some(value);
            index
        }
        None => {
            table.push(Some(value));
            table.len() - 1
        }
    }
}
