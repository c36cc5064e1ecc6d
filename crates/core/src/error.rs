//! MPI error classes and the error value every core operation returns.
//!
//! The numeric values are MPICH's, so the C layer can return them unchanged.

use std::fmt;

/// MPI error classes used by the core (MPICH's values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
#[allow(missing_docs)]
pub enum ErrorClass {
    Success = 0,
    Buffer = 1,
    Count = 2,
    Type = 3,
    Tag = 4,
    Comm = 5,
    Rank = 6,
    Root = 7,
    Group = 8,
    Op = 9,
    Topology = 10,
    Dims = 11,
    Arg = 12,
    Unknown = 13,
    Truncate = 14,
    Other = 15,
    Intern = 16,
    InStatus = 17,
    Pending = 18,
    Request = 19,
    /// MPI-IO: permission denied (MPI_ERR_ACCESS).
    Access = 20,
    /// MPI-IO: bad amode combination at MPI_File_open.
    Amode = 21,
    /// MPI-IO: invalid file name.
    BadFile = 22,
    /// A value that does not fit the data representation it is converted
    /// to (external32's 4-byte `long`).
    Conversion = 23,
    /// MPI_Register_datarep: the name is taken.
    DupDatarep = 24,
    /// MPI-IO: the file exists (MPI_MODE_EXCL).
    FileExists = 25,
    /// MPI-IO: the file is open elsewhere (MPI_File_delete).
    FileInUse = 26,
    /// MPI-IO: invalid file handle.
    File = 27,
    Info = 28,
    InfoKey = 29,
    InfoValue = 30,
    InfoNokey = 31,
    /// MPI-IO: an I/O error (including a block no replica holds intact).
    Io = 32,
    /// Dynamic processes: no port published under the service name.
    Name = 33,
    NoMem = 34,
    /// MPI-IO: collective arguments differ between processes.
    NotSame = 35,
    /// MPI-IO: no space left on the device.
    NoSpace = 36,
    /// MPI-IO: the file does not exist.
    NoSuchFile = 37,
    /// Dynamic processes: an invalid or closed port name.
    Port = 38,
    /// MPI-IO: write to a file opened read-only.
    ReadOnly = 40,
    /// Dynamic processes: a service name that cannot be published or
    /// unpublished.
    Service = 41,
    /// Dynamic processes: processes could not be started.
    Spawn = 42,
    /// MPI-IO: a data representation other than "native".
    UnsupportedDatarep = 43,
    Unsupported = 44,
    Win = 45,
    Base = 46,
    LockType = 47,
    Keyval = 48,
    RmaConflict = 49,
    RmaSync = 50,
    Size = 51,
    Disp = 52,
    Assert = 53,
    RmaRange = 55,
    RmaAttach = 56,
    RmaShared = 57,
    RmaFlavor = 58,
    /// MPI_ERR_SESSION (MPI-4): an invalid session.
    Session = 75,
    /// MPIX_ERR_PROC_FAILED (MPICH's value): a process the operation needs has failed.
    ProcFailed = 101,
    /// MPIX_ERR_PROC_FAILED_PENDING: a wildcard receive cannot start while a
    /// failure in its communicator is not acknowledged (`MPIX_Comm_failure_ack`).
    ProcFailedPending = 102,
    /// MPIX_ERR_REVOKED: the communicator was revoked (`MPIX_Comm_revoke`).
    Revoked = 103,
}

impl ErrorClass {
    /// Every class the core knows, for lookups by number.
    pub const ALL: [ErrorClass; 61] = [
        ErrorClass::Success,
        ErrorClass::Buffer,
        ErrorClass::Count,
        ErrorClass::Type,
        ErrorClass::Tag,
        ErrorClass::Comm,
        ErrorClass::Rank,
        ErrorClass::Root,
        ErrorClass::Group,
        ErrorClass::Op,
        ErrorClass::Topology,
        ErrorClass::Dims,
        ErrorClass::Arg,
        ErrorClass::Unknown,
        ErrorClass::Truncate,
        ErrorClass::Other,
        ErrorClass::Intern,
        ErrorClass::InStatus,
        ErrorClass::Pending,
        ErrorClass::Request,
        ErrorClass::Access,
        ErrorClass::Amode,
        ErrorClass::BadFile,
        ErrorClass::Conversion,
        ErrorClass::DupDatarep,
        ErrorClass::FileExists,
        ErrorClass::FileInUse,
        ErrorClass::File,
        ErrorClass::Info,
        ErrorClass::InfoKey,
        ErrorClass::InfoValue,
        ErrorClass::InfoNokey,
        ErrorClass::Io,
        ErrorClass::Name,
        ErrorClass::NoMem,
        ErrorClass::NotSame,
        ErrorClass::NoSpace,
        ErrorClass::NoSuchFile,
        ErrorClass::Port,
        ErrorClass::ReadOnly,
        ErrorClass::Service,
        ErrorClass::Spawn,
        ErrorClass::UnsupportedDatarep,
        ErrorClass::Unsupported,
        ErrorClass::Win,
        ErrorClass::Base,
        ErrorClass::LockType,
        ErrorClass::Size,
        ErrorClass::Disp,
        ErrorClass::Assert,
        ErrorClass::Keyval,
        ErrorClass::RmaConflict,
        ErrorClass::RmaSync,
        ErrorClass::RmaRange,
        ErrorClass::RmaAttach,
        ErrorClass::RmaShared,
        ErrorClass::RmaFlavor,
        ErrorClass::Session,
        ErrorClass::ProcFailed,
        ErrorClass::ProcFailedPending,
        ErrorClass::Revoked,
    ];

    /// The standard's short description of the class.
    pub fn description(self) -> &'static str {
        match self {
            ErrorClass::Success => "No MPI error",
            ErrorClass::Buffer => "Invalid buffer pointer",
            ErrorClass::Count => "Invalid count argument",
            ErrorClass::Type => "Invalid datatype argument",
            ErrorClass::Tag => "Invalid tag argument",
            ErrorClass::Comm => "Invalid communicator",
            ErrorClass::Rank => "Invalid rank",
            ErrorClass::Root => "Invalid root",
            ErrorClass::Group => "Invalid group",
            ErrorClass::Op => "Invalid operation",
            ErrorClass::Topology => "Invalid topology",
            ErrorClass::Dims => "Invalid dimension argument",
            ErrorClass::Arg => "Invalid argument",
            ErrorClass::Unknown => "Unknown error",
            ErrorClass::Truncate => "Message truncated on receive",
            ErrorClass::Other => "Other MPI error",
            ErrorClass::Intern => "Internal MPI error",
            ErrorClass::InStatus => "Error code is in status",
            ErrorClass::Pending => "Pending request",
            ErrorClass::Request => "Invalid MPI_Request",
            ErrorClass::Access => "Permission denied",
            ErrorClass::Amode => "Invalid amode value in MPI_File_open",
            ErrorClass::BadFile => "Invalid file name",
            ErrorClass::Conversion => "An error occurred in a user-supplied data conversion function",
            ErrorClass::DupDatarep => "Conversion functions could not be registered because a data representation with the same name already exists",
            ErrorClass::FileExists => "File exists",
            ErrorClass::FileInUse => {
                "File operation could not be completed, as the file is currently open by some process"
            },
            ErrorClass::File => "Invalid MPI_File",
            ErrorClass::Io => "Other I/O error",
            ErrorClass::NotSame => {
                "Collective argument not identical on all processes or collective routines called in a different order"
            },
            ErrorClass::NoSpace => "Not enough space for file",
            ErrorClass::NoSuchFile => "File does not exist",
            ErrorClass::ReadOnly => "Read-only file or filesystem name",
            ErrorClass::UnsupportedDatarep => "Unsupported datarep passed to MPI_File_set_view",
            ErrorClass::Info => "Invalid MPI_Info",
            ErrorClass::InfoKey => "Invalid info key",
            ErrorClass::InfoValue => "Invalid info value",
            ErrorClass::InfoNokey => "Info key not found",
            ErrorClass::NoMem => "Out of memory",
            ErrorClass::Name => "Invalid service name (see MPI_Publish_name)",
            ErrorClass::Port => "Invalid port",
            ErrorClass::Service => "Invalid service name",
            ErrorClass::Spawn => "Error in spawn call",
            ErrorClass::Unsupported => "Unsupported operation",
            ErrorClass::Keyval => "Invalid keyval",
            ErrorClass::Win => "Invalid MPI_Win",
            ErrorClass::Base => "Invalid base address",
            ErrorClass::LockType => "Invalid lock type",
            ErrorClass::Size => "Invalid size argument",
            ErrorClass::Disp => "Invalid displacement argument",
            ErrorClass::Assert => "Invalid assert argument",
            ErrorClass::RmaConflict => "Conflicting accesses to window",
            ErrorClass::RmaSync => "Wrong synchronization of RMA calls",
            ErrorClass::RmaRange => "Target memory is not part of the window",
            ErrorClass::RmaAttach => "Memory cannot be attached",
            ErrorClass::RmaShared => "Memory cannot be shared",
            ErrorClass::RmaFlavor => "Passed window has the wrong flavor for the called function",
            ErrorClass::Session => "Invalid session",
            ErrorClass::ProcFailed => "Process failed",
            ErrorClass::ProcFailedPending => {
                "Process failure not acknowledged: wildcard receives wait for MPIX_Comm_failure_ack"
            }
            ErrorClass::Revoked => "Communicator revoked",
        }
    }

    /// Class from its number, if the core knows it.
    pub fn from_i32(value: i32) -> Option<ErrorClass> {
        ErrorClass::ALL
            .iter()
            .copied()
            .find(|class| *class as i32 == value)
    }
}

/// An MPI error: its class plus a message saying exactly what was wrong.
///
/// Boxed, so that `MpiResult<()>` is one pointer returned in a register and
/// every layer of a call passes its result on without copying a class and
/// a string through memory (the common path never fails; errors are cold).
/// The fields read as before through `Deref`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpiError(Box<ErrorDetail>);

/// What an [`MpiError`] says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorDetail {
    /// Error class returned to the application.
    pub class: ErrorClass,
    /// Human-readable detail (printed by MPI_ERRORS_ARE_FATAL).
    pub message: String,
}

impl MpiError {
    /// A new error of `class` with `message`.
    #[cold]
    pub fn new(class: ErrorClass, message: impl Into<String>) -> MpiError {
        MpiError(Box::new(ErrorDetail {
            class,
            message: message.into(),
        }))
    }
}

impl std::ops::Deref for MpiError {
    type Target = ErrorDetail;
    fn deref(&self) -> &ErrorDetail {
        &self.0
    }
}

impl std::ops::DerefMut for MpiError {
    fn deref_mut(&mut self) -> &mut ErrorDetail {
        &mut self.0
    }
}

impl fmt::Display for MpiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.class.description(), self.message)
    }
}

impl std::error::Error for MpiError {}

/// Result of every fallible core operation.
pub type MpiResult<T> = Result<T, MpiError>;

/// Shorthand for `Err(MpiError::new(class, message))`.
pub fn fail<T>(class: ErrorClass, message: impl Into<String>) -> MpiResult<T> {
    Err(MpiError::new(class, message))
}
