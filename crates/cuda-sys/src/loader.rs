//! Finding and opening the driver library: the names tried per platform, the
//! environment variable and explicit path that override them, the process-wide
//! driver, and the errors of a load that fails.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use crate::Driver;

/// The library names [`Driver::load`] tries on this platform, in order.
#[cfg(windows)]
pub const DRIVER_LIBRARY_NAMES: &[&str] = &["nvcuda.dll"];
/// The library names [`Driver::load`] tries on this platform, in order: the
/// driver's soname, the development symlink, and the path WSL2 mounts the driver at.
#[cfg(target_os = "linux")]
pub const DRIVER_LIBRARY_NAMES: &[&str] = &[
    "libcuda.so.1",
    "libcuda.so",
    "/usr/lib/wsl/lib/libcuda.so.1",
];
/// The library names [`Driver::load`] tries on this platform, in order.
#[cfg(not(any(windows, target_os = "linux")))]
pub const DRIVER_LIBRARY_NAMES: &[&str] = &["libcuda.dylib", "libcuda.so.1", "libcuda.so"];

/// The platform's usual driver library name (the first of [`DRIVER_LIBRARY_NAMES`]).
pub const DRIVER_LIBRARY: &str = DRIVER_LIBRARY_NAMES[0];

/// Environment variable naming the driver library to load instead of the usual names
/// (a file name or a path), read by the first [`driver()`] call that loads.
pub const DRIVER_LIBRARY_ENV: &str = "CUDA_DRIVER_LIBRARY";

/// The system loader's error, shared so that [`LoadError`] can be cloned.
#[derive(Debug, Clone)]
pub struct LoaderError(pub(crate) Arc<libloading::Error>);

impl LoaderError {
    /// The loader's own error.
    pub fn inner(&self) -> &libloading::Error {
        &self.0
    }
}

impl fmt::Display for LoaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for LoaderError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

/// Two loader errors are equal when they read the same.
impl PartialEq for LoaderError {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for LoaderError {}

/// Why the driver library could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// No library could be opened. `library` is the first name tried (the
    /// explicit one, when one was given); `tried` lists every name, and `errors`
    /// what the system loader said about each.
    LibraryNotFound {
        /// The first (or the explicitly requested) library name.
        library: String,
        /// Every name tried, in order.
        tried: Vec<String>,
        /// The loader's error for each name of `tried`, in the same order. The
        /// message lists them all when several names were tried, and the error's
        /// `source()` is the first: usually the telling one (on Linux, why
        /// `libcuda.so.1` did not open), not the last (the WSL path, absent on
        /// other machines).
        errors: Vec<LoaderError>,
    },
    /// The library opened but lacks a function this workspace needs (a driver
    /// older than the API used here).
    MissingSymbol {
        /// The library that was opened.
        library: String,
        /// The missing symbol.
        symbol: &'static str,
        /// The loader's error.
        source: LoaderError,
    },
    /// [`load_driver_from`] asked for one library while another is already loaded
    /// for this process.
    AlreadyLoaded {
        /// The library in use.
        loaded: String,
        /// The library asked for.
        requested: String,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::LibraryNotFound {
                library,
                tried,
                errors,
                ..
            } if tried.len() > 1 => {
                write!(
                    f,
                    "CUDA driver library `{library}` not found (is the NVIDIA driver installed?); tried "
                )?;
                for (i, name) in tried.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "; " };
                    match errors.get(i) {
                        Some(e) => write!(f, "{sep}{name} ({})", without_name(name, e))?,
                        None => write!(f, "{sep}{name}")?,
                    }
                }
                Ok(())
            }
            LoadError::LibraryNotFound { library, .. } => write!(
                f,
                "CUDA driver library `{library}` not found (is the NVIDIA driver installed?)"
            ),
            LoadError::MissingSymbol { library, symbol, .. } => write!(
                f,
                "CUDA driver library `{library}` lacks `{symbol}` (driver too old)"
            ),
            LoadError::AlreadyLoaded { loaded, requested } => write!(
                f,
                "cannot load CUDA driver library `{requested}`: `{loaded}` is already loaded in this process"
            ),
        }
    }
}

/// The loader's message for `name`, without the `name: ` that dlopen puts in front.
fn without_name(name: &str, e: &LoaderError) -> String {
    let text = e.to_string();
    match text.strip_prefix(name).and_then(|t| t.strip_prefix(": ")) {
        Some(rest) => rest.to_owned(),
        None => text,
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoadError::LibraryNotFound { errors, .. } => errors
                .first()
                .map(|e| e as &(dyn std::error::Error + 'static)),
            LoadError::MissingSymbol { source, .. } => Some(source),
            LoadError::AlreadyLoaded { .. } => None,
        }
    }
}

impl Driver {
    /// Opens the driver library: the one named by [`DRIVER_LIBRARY_ENV`] when that
    /// variable is set (and only that one), otherwise the first of
    /// [`DRIVER_LIBRARY_NAMES`] that opens.
    ///
    /// Opening a library runs its initialisers; for the NVIDIA driver (or a name
    /// that opens nothing) that is sound, which is why this one is safe. A variable
    /// naming some other library is the process owner's choice, like `LD_PRELOAD`.
    pub fn load() -> Result<Driver, LoadError> {
        if let Some(path) = std::env::var_os(DRIVER_LIBRARY_ENV).filter(|p| !p.is_empty()) {
            let path = path.to_string_lossy().into_owned();
            // SAFETY: the library the process owner named for this purpose.
            return unsafe { Driver::load_from(&path) };
        }
        // SAFETY: the platform's NVIDIA driver library names, whose initialisers are
        // sound and whose entry points have the driver API's signatures.
        unsafe { Driver::load_first(DRIVER_LIBRARY_NAMES) }
    }

    /// The first of `names` that opens and has every required symbol; a library
    /// that opens but lacks a symbol is reported at once (a driver too old).
    ///
    /// # Safety
    /// 1. As [`Driver::load_from`], for every name.
    unsafe fn load_first(names: &[&str]) -> Result<Driver, LoadError> {
        let mut errors = Vec::with_capacity(names.len());
        for name in names {
            // SAFETY: condition 1.
            match unsafe { Driver::load_from(name) } {
                Err(LoadError::LibraryNotFound { errors: e, .. }) => errors.extend(e),
                other => return other,
            }
        }
        Err(LoadError::LibraryNotFound {
            library: names.first().copied().unwrap_or_default().to_owned(),
            tried: names.iter().map(|n| (*n).to_owned()).collect(),
            errors,
        })
    }
}

/// The process-wide driver, once one has loaded. A failed load is not remembered: a
/// later call (or an explicit [`load_driver_from`]) tries again.
static DRIVER: OnceLock<Driver> = OnceLock::new();
/// Serialises loading, so two threads do not both open the library.
static LOADING: Mutex<()> = Mutex::new(());

/// The process-wide driver, loaded by the first call that succeeds (see
/// [`Driver::load`] for where it looks).
///
/// A failed load is not cached: every call without a driver tries again (a few
/// tens of microseconds on the error path), so a driver named later through
/// [`load_driver_from`] or installed meanwhile is found.
pub fn driver() -> Result<&'static Driver, LoadError> {
    if let Some(d) = DRIVER.get() {
        return Ok(d);
    }
    let _serial = LOADING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = DRIVER.get() {
        return Ok(d);
    }
    let d = Driver::load()?;
    Ok(DRIVER.get_or_init(|| d))
}

/// Loads the process-wide driver from `library` (a file name or a path) instead of
/// the usual names, for a driver installed somewhere the system loader does not
/// look. Succeeds at once if the same library is already loaded; fails with
/// [`LoadError::AlreadyLoaded`] if a different one is.
///
/// # Safety
/// 1. As [`Driver::load_from`]: `library` must be the NVIDIA driver (or open
///    nothing), since opening it runs its initialisers in this process.
pub unsafe fn load_driver_from(library: &str) -> Result<&'static Driver, LoadError> {
    let _serial = LOADING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = DRIVER.get() {
        return if d.library == library {
            Ok(d)
        } else {
            Err(LoadError::AlreadyLoaded {
                loaded: d.library.clone(),
                requested: library.to_owned(),
            })
        };
    }
    // SAFETY: condition 1.
    let d = unsafe { Driver::load_from(library) }?;
    Ok(DRIVER.get_or_init(|| d))
}

/// The process-wide driver if it has already been loaded, without trying to load it.
pub fn driver_if_loaded() -> Option<&'static Driver> {
    DRIVER.get()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn missing_library_is_an_error_naming_it_with_the_loader_error_as_source() {
        // SAFETY: a library that does not exist runs nothing.
        let err = unsafe { Driver::load_from("libcuda-does-not-exist.so.7") }.unwrap_err();
        let LoadError::LibraryNotFound { library, tried, .. } = &err else {
            panic!("unexpected {err:?}");
        };
        assert_eq!(library, "libcuda-does-not-exist.so.7");
        assert_eq!(tried, &["libcuda-does-not-exist.so.7"]);
        assert!(err.to_string().contains("libcuda-does-not-exist.so.7"));
        let source = err.source().expect("the loader's error is the source");
        assert!(
            source.downcast_ref::<LoaderError>().is_some(),
            "source is the loader's error, not a string: {source:?}"
        );
        assert!(
            source.source().is_some(),
            "and it wraps libloading's own error"
        );
    }

    #[test]
    fn every_usual_name_is_tried_and_listed() {
        let names = ["libcuda-nope-a.so.1", "libcuda-nope-b.so"];
        // SAFETY: libraries that do not exist run nothing.
        let err = unsafe { Driver::load_first(&names) }.unwrap_err();
        match &err {
            LoadError::LibraryNotFound { library, tried, .. } => {
                assert_eq!(library, "libcuda-nope-a.so.1");
                assert_eq!(tried, &names);
            }
            other => panic!("unexpected {other:?}"),
        }
        let LoadError::LibraryNotFound { errors, .. } = &err else {
            unreachable!()
        };
        assert_eq!(errors.len(), 2, "one loader error per name");
        let source = err.source().and_then(|s| s.downcast_ref::<LoaderError>());
        assert_eq!(
            source,
            Some(&errors[0]),
            "the source is the first name's error"
        );
        let text = err.to_string();
        // Each name with its own error, in order, the name not repeated.
        let (a, b) = (
            without_name(names[0], &errors[0]),
            without_name(names[1], &errors[1]),
        );
        assert_eq!(
            text,
            format!(
                "CUDA driver library `libcuda-nope-a.so.1` not found (is the NVIDIA driver \
                 installed?); tried libcuda-nope-a.so.1 ({a}); libcuda-nope-b.so ({b})"
            )
        );
        #[cfg(target_os = "linux")]
        assert!(
            a.contains("No such file") && !a.contains("libcuda-nope-a.so.1"),
            "{a}"
        );
        assert!(DRIVER_LIBRARY_NAMES.contains(&DRIVER_LIBRARY));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn library_without_the_symbols_is_a_missing_symbol_error() {
        // libc opens everywhere on Linux but exports no CUDA entry point.
        // SAFETY: libc is already loaded in every process; it has no cuInit, so no
        // function of it is called.
        let err = unsafe { Driver::load_from("libc.so.6") }.unwrap_err();
        match &err {
            LoadError::MissingSymbol {
                library, symbol, ..
            } => {
                assert_eq!((library.as_str(), *symbol), ("libc.so.6", "cuInit"));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.to_string().contains("cuInit"));
        assert!(err.source().is_some());
        // A library without the symbols stops the search: it is reported, not skipped.
        // SAFETY: as above; the second name is never reached.
        let err = unsafe { Driver::load_first(&["libc.so.6", "libcuda-nope.so"]) }.unwrap_err();
        assert!(matches!(err, LoadError::MissingSymbol { .. }), "{err:?}");
    }
}
