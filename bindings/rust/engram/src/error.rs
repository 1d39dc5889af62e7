//! Errors: [`Error`] carries the `ENGRAM_E_*` code and the library's message.
use super::*;

/// A failed call: the `ENGRAM_E_*` code and the library's message (what was
/// wrong, and how to fix it).
#[derive(Clone, Debug, PartialEq, Eq)]
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let client = engram::Client::connect(None)?;
/// match client.open_table("replay") {
///     Ok(_table) => {}
///     Err(e) if e.code() == engram_sys::ENGRAM_E_NOT_FOUND => eprintln!("no table yet: {}", e.message()),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
pub struct Error {
    pub(crate) code: i32,
    pub(crate) message: String,
}

impl Error {
    pub(crate) fn last(code: c_int) -> Error {
        // engram_last_error is this thread's message, valid until its next failing call.
        let message = unsafe { CStr::from_ptr(sys::engram_last_error()) }.to_string_lossy().into_owned();
        Error { code, message }
    }
    pub(crate) fn new(code: c_int, message: impl Into<String>) -> Error {
        Error { code, message: message.into() }
    }
    /// The `ENGRAM_E_*` code (engram_sys has the constants).
    pub fn code(&self) -> i32 {
        self.code
    }
    /// What was wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// The code's name, as engram_strerror gives it.
    pub fn name(&self) -> String {
        unsafe { CStr::from_ptr(sys::engram_strerror(self.code)) }.to_string_lossy().into_owned()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.name())
    }
}

impl std::error::Error for Error {}

/// The result of every fallible call.
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// fn table_size(client: &engram::Client) -> engram::Result<u64> {
///     Ok(client.table_info("replay")?.size)
/// }
/// # Ok(()) }
/// ```
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn check(rc: c_int) -> Result<()> {
    if rc == sys::ENGRAM_OK {
        Ok(())
    } else {
        Err(Error::last(rc))
    }
}

pub(crate) fn c_string(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(sys::ENGRAM_E_INVALID, format!("{} {:?} contains a NUL byte", what, s)))
}
