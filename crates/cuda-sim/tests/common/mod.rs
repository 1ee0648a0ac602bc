//! What the simulator's own tests share: finding the built simulator, loading it
//! through `cuda-sys` exactly as the library loads libcuda, calling its entry points,
//! and running a scenario in a child process (a detection aborts the process).

#![allow(dead_code)] // each test binary uses its own subset

use std::ffi::{c_void, CStr};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

pub use cuda_sys::{CUcontext, CUdeviceptr, CUevent, CUstream, Driver};

/// Calls a driver entry point of `$d` and returns its code.
///
/// The tests pass live out-pointers, plain values, and, deliberately, handles and
/// addresses that the driver must refuse by looking them up, never by dereferencing
/// them: that is the contract they check.
#[macro_export]
macro_rules! cu {
    ($d:expr, $f:ident($($a:expr),* $(,)?)) => {
        $crate::common::Call::call($d.$f, ($($a,)*))
    };
}

/// A driver entry point called with a tuple of its arguments (see [`cu!`]).
pub trait Call<Args> {
    /// Makes the call.
    fn call(self, args: Args) -> u32;
}

macro_rules! impl_call {
    ($($t:ident),*) => {
        impl<$($t),*> Call<($($t,)*)> for unsafe extern "C" fn($($t),*) -> u32 {
            #[allow(non_snake_case)]
            fn call(self, ($($t,)*): ($($t,)*)) -> u32 {
                // SAFETY: see `cu!`: the tests' arguments are live out-pointers,
                // host memory they own, plain values, or addresses and handles the
                // driver only looks up.
                unsafe { self($($t),*) }
            }
        }
    };
}

impl_call!();
impl_call!(A);
impl_call!(A, B);
impl_call!(A, B, C);
impl_call!(A, B, C, D);
impl_call!(A, B, C, D, E);
impl_call!(A, B, C, D, E, F);
impl_call!(A, B, C, D, E, F, G);
impl_call!(A, B, C, D, E, F, G, H);
impl_call!(A, B, C, D, E, F, G, H, I);
impl_call!(A, B, C, D, E, F, G, H, I, J);
impl_call!(A, B, C, D, E, F, G, H, I, J, K);

/// The built simulator: `CUDA_SIM_LIBRARY`, else `libcuda_sim.so` beside this
/// executable or one folder up (`deps/` for tests, `examples/` for examples).
pub fn sim_path() -> PathBuf {
    if let Some(p) = std::env::var_os("CUDA_SIM_LIBRARY") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe.parent().expect("the executable's folder");
    let candidates = [
        dir.join("libcuda_sim.so"),
        dir.join("../libcuda_sim.so"),
        dir.join("../deps/libcuda_sim.so"),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| panic!("the simulator is not built beside {}", exe.display()))
}

/// The library [`load`] opened first, for [`symbol`].
static LOADED: OnceLock<String> = OnceLock::new();

/// The driver at `path`, loaded for the rest of the process.
pub fn load(path: &str) -> &'static Driver {
    // SAFETY: 1. the simulator, or the NVIDIA driver: both are sound to open.
    // 2. Both export the CUDA driver API's signatures.
    let d = unsafe { Driver::load_from(path) }.unwrap_or_else(|e| panic!("load {path}: {e}"));
    LOADED.get_or_init(|| path.to_owned());
    Box::leak(Box::new(d))
}

/// The simulator, loaded.
pub fn sim() -> &'static Driver {
    load(sim_path().to_str().expect("a UTF-8 path"))
}

/// An entry point that `cuda_sys::Driver` does not list, from the driver [`load`]
/// opened (opened again with libloading: the same library instance).
///
/// # Safety
/// 1. `F` is the C signature the driver exports `name` with.
pub unsafe fn symbol<F: Copy>(name: &str) -> F {
    let path = LOADED.get().expect("a driver is loaded");
    // SAFETY: the library is already loaded, and opening it again runs nothing.
    let lib = unsafe { libloading::Library::new(path) }.expect("open the driver again");
    let lib: &'static libloading::Library = Box::leak(Box::new(lib));
    let mut cname = name.as_bytes().to_vec();
    cname.push(0);
    // SAFETY: condition 1.
    *unsafe { lib.get::<F>(&cname) }.unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `cuCtxCreate_v2`.
pub type CtxCreate = unsafe extern "C" fn(*mut CUcontext, u32, i32) -> u32;

/// The driver's name for `code` (`cuGetErrorName`), or the number.
pub fn name(d: &Driver, code: u32) -> String {
    let mut p = std::ptr::null();
    if cu!(d, cuGetErrorName(code, &mut p)) != 0 || p.is_null() {
        return format!("code {code}");
    }
    // SAFETY: on success the driver points at a static NUL-terminated string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Panics unless `code` is `CUDA_SUCCESS`, naming `what`.
#[track_caller]
pub fn ok(what: &str, code: u32) {
    assert_eq!(code, 0, "{what} returned {code}");
}

/// Device 0's primary context, retained and made current on this thread.
pub fn context(d: &Driver) -> CUcontext {
    ok("cuInit", cu!(d, cuInit(0)));
    let mut ctx = std::ptr::null_mut();
    ok(
        "cuDevicePrimaryCtxRetain",
        cu!(d, cuDevicePrimaryCtxRetain(&mut ctx, 0)),
    );
    ok("cuCtxSetCurrent", cu!(d, cuCtxSetCurrent(ctx)));
    ctx
}

/// A device allocation of `bytes` in the current context.
pub fn alloc(d: &Driver, bytes: usize) -> CUdeviceptr {
    let mut p = 0;
    ok("cuMemAlloc", cu!(d, cuMemAlloc(&mut p, bytes)));
    p
}

/// Writes `bytes` to device memory at `dst` with the driver's synchronous copy, then
/// waits for the context: from pageable memory `cuMemcpyHtoD` may return before its
/// copy lands (it runs on the legacy stream, which non-blocking streams do not wait
/// for), and the simulator's always does.
pub fn upload(d: &Driver, dst: CUdeviceptr, bytes: &[u8]) {
    ok(
        "cuMemcpyHtoD",
        cu!(d, cuMemcpyHtoD(dst, bytes.as_ptr().cast(), bytes.len())),
    );
    ok("cuCtxSynchronize", cu!(d, cuCtxSynchronize()));
}

/// Page-locked host memory of `bytes`, as a slice that lives until freed.
pub fn pinned(d: &Driver, bytes: usize) -> &'static mut [u8] {
    let mut p: *mut c_void = std::ptr::null_mut();
    ok("cuMemHostAlloc", cu!(d, cuMemHostAlloc(&mut p, bytes, 0)));
    // SAFETY: the driver returned `bytes` of fresh page-locked memory, which only
    // this slice refers to until the test frees it (and then no longer uses it).
    unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), bytes) }
}

/// A stream with `flags`.
pub fn stream(d: &Driver, flags: u32) -> CUstream {
    let mut s = std::ptr::null_mut();
    ok("cuStreamCreate", cu!(d, cuStreamCreate(&mut s, flags)));
    s
}

/// An event with `flags`.
pub fn event(d: &Driver, flags: u32) -> CUevent {
    let mut e = std::ptr::null_mut();
    ok("cuEventCreate", cu!(d, cuEventCreate(&mut e, flags)));
    e
}

/// Bytes of each copy that [`keep_busy`] queues.
pub const BUSY_BYTES: usize = 256 << 20;

/// Two device buffers to copy between; dropping them waits for the context first.
pub struct Busy {
    d: &'static Driver,
    a: CUdeviceptr,
    b: CUdeviceptr,
}

impl Busy {
    pub fn new(d: &'static Driver) -> Busy {
        Busy {
            d,
            a: alloc(d, BUSY_BYTES),
            b: alloc(d, BUSY_BYTES),
        }
    }

    /// Queues `rounds` round trips of [`BUSY_BYTES`] on `s` (about 5 ms each on the
    /// simulator, 0.3 ms on an H200): whatever is queued next is certainly still
    /// pending for a while.
    pub fn queue(&self, d: &Driver, s: CUstream, rounds: usize) {
        for _ in 0..rounds {
            ok(
                "busy",
                cu!(d, cuMemcpyDtoDAsync(self.b, self.a, BUSY_BYTES, s)),
            );
            ok(
                "busy",
                cu!(d, cuMemcpyDtoDAsync(self.a, self.b, BUSY_BYTES, s)),
            );
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let d = self.d;
        cu!(d, cuCtxSynchronize());
        cu!(d, cuMemFree(self.a));
        cu!(d, cuMemFree(self.b));
    }
}

/// The pattern byte of index `i` for `seed` (never one value throughout).
pub fn byte(i: usize, seed: u8) -> u8 {
    (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8
}

/// `n` bytes of the pattern of `seed`.
pub fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| byte(i, seed)).collect()
}

/// Set in a child's environment to the scenario it runs.
pub const CHILD: &str = "CUDA_SIM_TEST_CHILD";

/// Whether this process is the child started for `scenario`.
pub fn is_child(scenario: &str) -> bool {
    std::env::var(CHILD).as_deref() == Ok(scenario)
}

/// Runs this test executable again for `test` alone, as the child for `scenario`,
/// with `env` added, and returns what it did.
pub fn run_child(test: &str, scenario: &str, env: &[(&str, &str)]) -> Output {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    // The leak report is the child's only as `env` asks: one that inherited a
    // runner's (`cargo xtask test-gpu --sim`, `cargo xtask mutants`) would write
    // into it, and could end with its leak status.
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, scenario)
        .env_remove("CUDA_SIM_LEAK_REPORT")
        .env_remove("CUDA_SIM_LEAK_EXIT_STATUS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run the child")
}

/// Asserts that the child was killed by `SIGABRT` and that its stderr says every
/// one of `words`; returns the stderr.
#[track_caller]
pub fn aborted_saying(out: &Output, words: &[&str]) -> String {
    use std::os::unix::process::ExitStatusExt;
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.signal(),
        Some(libc_sigabrt()),
        "expected the child to abort, it ended with {}:\n{err}",
        out.status
    );
    for w in words {
        assert!(err.contains(w), "the abort message lacks {w:?}:\n{err}");
    }
    err
}

/// `SIGABRT` on Linux.
fn libc_sigabrt() -> i32 {
    6
}
