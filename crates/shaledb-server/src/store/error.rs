//! [`Error`]: why a storage operation failed, in storage terms. The command layer turns it into the reply
//! Redis clients expect (`impl From<store::Error> for Reply` in `commands/mod.rs`); nothing here knows RESP.

use std::fmt;

/// A storage operation's failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The key holds a value of another type (Redis's `WRONGTYPE`).
    WrongType,
    /// A stored value could not be decoded: the text says what was wrong.
    Corrupt(String),
    /// The engine failed a read: the engine's error, as text.
    Read(String),
    /// A key and value larger than the engine holds as one entry
    /// (`shaledb::options::limits::MAX_KEY_VALUE_BYTES`); nothing was written.
    TooLarge {
        /// The most bytes of key and value one entry may hold.
        max: usize,
    },
}

impl Error {
    /// A failed engine read.
    pub fn read(e: impl fmt::Display) -> Error {
        Error::Read(e.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::WrongType => f.write_str("the key holds a value of another type"),
            Error::Corrupt(why) => f.write_str(why),
            Error::Read(e) => write!(f, "read failed: {e}"),
            Error::TooLarge { max } => {
                write!(f, "key plus value too large: ShaleDB stores at most {max} bytes of key and value per key")
            }
        }
    }
}

impl std::error::Error for Error {}
