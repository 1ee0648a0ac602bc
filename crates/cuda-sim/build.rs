//! Links the simulator with `-z nodelete`: once loaded it is never unmapped, even when
//! every handle to it is closed. Its stream threads keep running its code after the
//! program's last `dlclose` (a `libloading::Library` dropped while work is queued),
//! as the real driver's threads keep running libcuda's.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    }
}
