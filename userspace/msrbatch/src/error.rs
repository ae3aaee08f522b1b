// SPDX-License-Identifier: GPL-2.0
//! Errors: the errno is always preserved.

use std::fmt;
use std::io;

/// An errno value with its symbolic name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

/// Symbolic names of the errno values this API produces.
const NAMES: &[(i32, &std::ffi::CStr)] = &[
    (libc::EPERM, c"EPERM"),
    (libc::ENOENT, c"ENOENT"),
    (libc::EIO, c"EIO"),
    (libc::ENXIO, c"ENXIO"),
    (libc::E2BIG, c"E2BIG"),
    (libc::EBADF, c"EBADF"),
    (libc::EAGAIN, c"EAGAIN"),
    (libc::ENOMEM, c"ENOMEM"),
    (libc::EACCES, c"EACCES"),
    (libc::EFAULT, c"EFAULT"),
    (libc::EBUSY, c"EBUSY"),
    (libc::ENODEV, c"ENODEV"),
    (libc::EINVAL, c"EINVAL"),
    (libc::ENOTTY, c"ENOTTY"),
    (libc::ERANGE, c"ERANGE"),
    (libc::EOPNOTSUPP, c"EOPNOTSUPP"),
    (libc::EPROTONOSUPPORT, c"EPROTONOSUPPORT"),
    (libc::EROFS, c"EROFS"),
    (libc::ENOTUNIQ, c"ENOTUNIQ"),
    (libc::ECANCELED, c"ECANCELED"),
    (libc::ETIME, c"ETIME"),
    (libc::EPERM, c"EPERM"),
    (libc::ENOENT, c"ENOENT"),
    (libc::ENOTRECOVERABLE, c"ENOTRECOVERABLE"),
    (libc::ETIMEDOUT, c"ETIMEDOUT"),
    (libc::ENOSPC, c"ENOSPC"),
];

impl Errno {
    /// The symbolic name as a C string, if it is one this API produces.
    pub fn c_name(self) -> Option<&'static std::ffi::CStr> {
        NAMES.iter().find(|(n, _)| *n == self.0).map(|(_, s)| *s)
    }

    /// The symbolic name (`"EIO"`), or `"E<number>"` for unlisted values.
    pub fn name(self) -> String {
        self.c_name()
            .and_then(|s| s.to_str().ok())
            .map_or_else(|| format!("E{}", self.0), str::to_string)
    }

    /// The C library's description of the error (`strerror`).
    pub fn description(self) -> String {
        let text = io::Error::from_raw_os_error(self.0).to_string();
        // std appends " (os error N)" to strerror's text.
        match text.strip_suffix(&format!(" (os error {})", self.0)) {
            Some(s) => s.to_string(),
            None => text,
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name())
    }
}

/// An error of a whole call (opening the device, or an ioctl the kernel
/// refused before running anything).
#[derive(Debug)]
pub struct Error {
    errno: Errno,
    what: String,
    op_index: Option<u32>,
    reason: Option<String>,
}

impl Error {
    /// An error with `errno` (positive) and a description of what failed.
    pub fn new(errno: i32, what: impl Into<String>) -> Self {
        Error {
            errno: Errno(errno),
            what: what.into(),
            op_index: None,
            reason: None,
        }
    }

    /// `EINVAL` for text that does not parse: `why` says what is wrong.
    pub(crate) fn invalid(why: impl Into<String>) -> Self {
        Self::new(libc::EINVAL, why)
    }

    /// What failed, without the errno.
    pub fn what(&self) -> &str {
        &self.what
    }

    pub(crate) fn from_io(what: impl Into<String>, e: &io::Error) -> Self {
        Error {
            errno: Errno(e.raw_os_error().unwrap_or(libc::EIO)),
            what: what.into(),
            op_index: None,
            reason: None,
        }
    }

    pub(crate) fn with_index(mut self, index: Option<u32>) -> Self {
        self.op_index = index;
        self
    }

    /// Adds why the kernel refused, in words (printed last).
    pub(crate) fn with_reason(mut self, reason: Option<String>) -> Self {
        self.reason = reason;
        self
    }

    /// Why the kernel refused, in words naming the limit and the value
    /// ([`crate::refusal`]), where the library knows.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// The errno the kernel (or the C library) returned.
    pub fn errno(&self) -> Errno {
        self.errno
    }

    /// For a batch the kernel rejected while validating, the index of the op it
    /// blamed.
    pub fn op_index(&self) -> Option<u32> {
        self.op_index
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} ({})",
            self.what,
            self.errno.name(),
            self.errno.description()
        )?;
        if let Some(i) = self.op_index {
            write!(f, " at op {i}")?;
        }
        if let Some(r) = &self.reason {
            write!(f, ": {r}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

impl From<Error> for io::Error {
    fn from(e: Error) -> Self {
        io::Error::new(
            io::Error::from_raw_os_error(e.errno.0).kind(),
            e.to_string(),
        )
    }
}

/// Result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;
