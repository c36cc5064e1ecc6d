//! The one error type of the PMI client and codec: a sentence meant for a
//! human reading a failed job's stderr, since nothing above can recover from
//! a broken process manager connection except by reporting it.

use std::fmt;

/// A PMI failure: bad environment, lost connection, protocol violation, or a
/// request the process manager refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmiError {
    message: String,
}

impl PmiError {
    /// An error carrying `message`, which should say what failed and why.
    pub fn new(message: impl Into<String>) -> PmiError {
        PmiError {
            message: message.into(),
        }
    }

    /// The message without the `PMI error: ` prefix.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for PmiError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "PMI error: {}", self.message)
    }
}

impl std::error::Error for PmiError {}
