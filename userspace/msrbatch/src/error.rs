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
    (libc::ENOTRECOVERABLE, c"ENOTRECOVERABLE"),
    (libc::ETIMEDOUT, c"ETIMEDOUT"),
    (libc::ENOSPC, c"ENOSPC"),
    (libc::EDQUOT, c"EDQUOT"),
    (libc::EBADMSG, c"EBADMSG"),
    (libc::EPIPE, c"EPIPE"),
    (libc::ESRCH, c"ESRCH"),
    (libc::EXDEV, c"EXDEV"),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::path::Path;

    /// Every `E...` word in `text` that names an errno (not a register or
    /// an epoll flag).
    fn errno_words(text: &str) -> HashSet<String> {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.len() > 2 && w.starts_with('E'))
            .filter(|w| {
                w[1..]
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
            })
            .filter(|w| !matches!(*w, "EAX" | "EBX" | "ECX" | "EDX") && !w.starts_with("EPOLL"))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn each_errno_is_named_once() {
        let mut seen = HashSet::new();
        for (n, name) in NAMES {
            assert!(seen.insert(*n), "{name:?} listed twice");
        }
    }

    /// The names cover every errno the ABI documents and every one the
    /// library itself returns.
    #[test]
    fn names_cover_the_abi_and_the_library() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut words =
            errno_words(&std::fs::read_to_string(root.join("../../Documentation/abi.md")).unwrap());
        for entry in std::fs::read_dir(root.join("src")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                words.extend(
                    text.split("libc::")
                        .skip(1)
                        .map(|rest| {
                            let end = rest
                                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                                .unwrap_or(rest.len());
                            &rest[..end]
                        })
                        .flat_map(errno_words),
                );
            }
        }
        let named: HashSet<&str> = NAMES.iter().filter_map(|(_, s)| s.to_str().ok()).collect();
        let mut missing: Vec<_> = words
            .iter()
            .filter(|w| !named.contains(w.as_str()))
            .collect();
        missing.sort();
        assert!(missing.is_empty(), "errnos without a name: {missing:?}");
    }
}
