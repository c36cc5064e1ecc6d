//! MPICH handle encodings: bits 31-30 kind (0 null, 1 builtin, 2 direct),
//! bits 29-26 object class, low bits an index. Decoding checks kind and
//! class, so a garbage or wrong-class handle is an MPI error, not a crash.

use crate::abi::*;

const KIND_BUILTIN: u32 = 1 << 30;
const KIND_DIRECT: u32 = 2 << 30;
const CLASS_SHIFT: u32 = 26;
const CLASS_COMM: u32 = 1;
const CLASS_GROUP: u32 = 2;
const CLASS_INFO: u32 = 7;
const CLASS_KEYVAL: u32 = 9;
const CLASS_ERRHANDLER: u32 = 5;
const CLASS_OP: u32 = 6;
const CLASS_REQUEST: u32 = 11;
const INDEX_MASK: u32 = (1 << 26) - 1;
/// Bit that marks a request-class handle as an MPI_Message.
const MESSAGE_BIT: u32 = 1 << 25;

fn direct(class: u32, index: usize) -> c_int {
    (KIND_DIRECT | (class << CLASS_SHIFT) | index as u32) as c_int
}

fn direct_index(handle: c_int, class: u32) -> Option<usize> {
    let bits = handle as u32;
    (bits & !INDEX_MASK == KIND_DIRECT | (class << CLASS_SHIFT))
        .then_some((bits & INDEX_MASK) as usize)
}

/// Communicator table index of a handle (no liveness check).
#[inline]
pub fn comm_index(handle: MPI_Comm) -> Option<usize> {
    match handle {
        MPI_COMM_WORLD => Some(resmpi_core::WORLD),
        MPI_COMM_SELF => Some(resmpi_core::SELF),
        _ => direct_index(handle, CLASS_COMM),
    }
}

/// Handle of communicator table index `index`.
pub fn comm_handle(index: usize) -> MPI_Comm {
    match index {
        resmpi_core::WORLD => MPI_COMM_WORLD,
        resmpi_core::SELF => MPI_COMM_SELF,
        _ => direct(CLASS_COMM, index),
    }
}

/// Group table index of a user group handle (not the predefined ones).
pub fn group_index(handle: MPI_Group) -> Option<usize> {
    direct_index(handle, CLASS_GROUP)
}

/// Handle of group table index `index`.
pub fn group_handle(index: usize) -> MPI_Group {
    direct(CLASS_GROUP, index)
}

/// Info table index of a user info handle (not MPI_INFO_ENV).
pub fn info_index(handle: MPI_Info) -> Option<usize> {
    direct_index(handle, CLASS_INFO)
}

/// Handle of info table index `index`.
pub fn info_handle(index: usize) -> MPI_Info {
    direct(CLASS_INFO, index)
}

/// Keyval table index of a user keyval (not the predefined attributes).
pub fn keyval_index(keyval: c_int) -> Option<usize> {
    direct_index(keyval, CLASS_KEYVAL)
}

/// User keyval of table index `index`.
pub fn keyval_handle(index: usize) -> c_int {
    direct(CLASS_KEYVAL, index)
}

/// Request slab index of a request handle (not MPI_REQUEST_NULL).
pub fn request_index(handle: MPI_Request) -> Option<u32> {
    direct_index(handle, CLASS_REQUEST)
        .filter(|index| *index as u32 & MESSAGE_BIT == 0)
        .map(|index| index as u32)
}

/// Handle of request slab index `index`.
pub fn request_handle(index: u32) -> MPI_Request {
    direct(CLASS_REQUEST, index as usize)
}

/// Probed-message index of an MPI_Message handle.
pub fn message_index(handle: MPI_Message) -> Option<usize> {
    direct_index(handle, CLASS_REQUEST)
        .filter(|index| *index as u32 & MESSAGE_BIT != 0)
        .map(|index| index & !(MESSAGE_BIT as usize))
}

/// Handle of probed-message index `index`.
pub fn message_handle(index: usize) -> MPI_Message {
    direct(CLASS_REQUEST, index | MESSAGE_BIT as usize)
}

/// Index of a user error handler handle.
pub fn errhandler_index(handle: MPI_Errhandler) -> Option<usize> {
    direct_index(handle, CLASS_ERRHANDLER)
}

/// Handle of user error handler `index`.
pub fn errhandler_handle(index: usize) -> MPI_Errhandler {
    direct(CLASS_ERRHANDLER, index)
}

/// Whether a handle names a predefined error handler.
pub fn is_builtin_errhandler(handle: MPI_Errhandler) -> bool {
    matches!(
        handle,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_RETURN | MPI_ERRORS_ABORT
    )
}

/// Index of a user op handle.
pub fn op_index(handle: MPI_Op) -> Option<usize> {
    direct_index(handle, CLASS_OP)
}

/// Handle of user op `index`.
pub fn op_handle(index: usize) -> MPI_Op {
    direct(CLASS_OP, index)
}

/// Predefined op of a builtin op handle.
pub fn builtin_op(handle: MPI_Op) -> Option<resmpi_core::op::Op> {
    use resmpi_core::op::Op;
    if handle as u32 & !0xff != KIND_BUILTIN | (CLASS_OP << CLASS_SHIFT) {
        return None;
    }
    Some(match handle {
        MPI_MAX => Op::Max,
        MPI_MIN => Op::Min,
        MPI_SUM => Op::Sum,
        MPI_PROD => Op::Prod,
        MPI_LAND => Op::LogicalAnd,
        MPI_BAND => Op::BitwiseAnd,
        MPI_LOR => Op::LogicalOr,
        MPI_BOR => Op::BitwiseOr,
        MPI_LXOR => Op::LogicalXor,
        MPI_BXOR => Op::BitwiseXor,
        MPI_MINLOC => Op::MinLoc,
        MPI_MAXLOC => Op::MaxLoc,
        MPI_REPLACE => Op::Replace,
        MPI_NO_OP => Op::NoOp,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_and_reject_other_classes() {
        assert_eq!(comm_index(comm_handle(7)), Some(7));
        assert_eq!(comm_index(MPI_COMM_WORLD), Some(0));
        assert_eq!(comm_index(MPI_COMM_NULL), None);
        assert_eq!(request_index(request_handle(5)), Some(5));
        assert_eq!(request_index(MPI_REQUEST_NULL), None);
        assert_eq!(request_index(message_handle(5)), None);
        assert_eq!(message_index(message_handle(5)), Some(5));
        assert_eq!(comm_index(request_handle(3)), None);
        assert_eq!(group_index(group_handle(4)), Some(4));
        assert_eq!(group_index(MPI_GROUP_EMPTY), None);
        assert_eq!(group_index(MPI_GROUP_NULL), None);
        assert_eq!(info_index(info_handle(2)), Some(2));
        assert_eq!(info_index(MPI_INFO_ENV), None);
        assert_eq!(keyval_index(keyval_handle(0)), Some(0));
        assert_eq!(keyval_index(MPI_TAG_UB), None);
        assert_eq!(keyval_index(MPI_KEYVAL_INVALID), None);
        assert_eq!(request_index(12345), None);
        assert!(builtin_op(MPI_SUM).is_some());
        assert!(builtin_op(MPI_OP_NULL).is_none());
        assert!(builtin_op(MPI_COMM_WORLD).is_none());
    }
}
