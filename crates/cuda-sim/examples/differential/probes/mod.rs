//! The differential program's probes: each makes one principal driver call (after
//! whatever set-up it needs) and answers with what the driver said, so that the
//! answers of two drivers can be set side by side. `expected` is the answer the
//! simulator gives and its own tests hold it to (`tests/fidelity.rs`): the CUDA
//! driver API reference's, except where `differs` says why the real driver may
//! answer otherwise (a check of the simulator's that is stricter than the driver's,
//! or something it does not model).

use cuda_sys::Driver;

mod args;
mod batch;
mod capture;
mod contexts;
mod ordering;
mod pitch2d;
mod pointers;

/// One probe.
pub struct Probe {
    /// Its group in the table.
    pub group: &'static str,
    /// The call it makes and on what.
    pub call: &'static str,
    /// The simulator's answer (the reference's, unless `differs`).
    pub expected: &'static str,
    /// Why the real driver may answer otherwise (a stricter check of the
    /// simulator's, or something it does not model), where it may.
    pub differs: Option<&'static str>,
    /// Makes the call and says what came back.
    pub run: fn(&'static Driver) -> String,
}

/// Every probe, in table order.
pub fn all() -> Vec<&'static Probe> {
    [
        args::PROBES,
        pointers::PROBES,
        ordering::PROBES,
        batch::PROBES,
        pitch2d::PROBES,
        capture::PROBES,
        contexts::PROBES,
    ]
    .iter()
    .flat_map(|p| p.iter())
    .collect()
}

/// A probe that the simulator answers as the reference (and the driver) does.
pub const fn probe(
    group: &'static str,
    call: &'static str,
    expected: &'static str,
    run: fn(&'static Driver) -> String,
) -> Probe {
    Probe {
        group,
        call,
        expected,
        differs: None,
        run,
    }
}

/// A probe where the real driver may answer otherwise than the simulator, and why.
pub const fn differs(
    group: &'static str,
    call: &'static str,
    expected: &'static str,
    why: &'static str,
    run: fn(&'static Driver) -> String,
) -> Probe {
    Probe {
        group,
        call,
        expected,
        differs: Some(why),
        run,
    }
}

/// What a probe's child process printed before its result.
pub const RESULT: &str = "RESULT\t";

/// Runs `cmd` (a child that runs one probe and prints [`RESULT`] and its answer),
/// giving up after two minutes; returns the answer, or how the child failed.
pub fn answer_of(mut cmd: std::process::Command) -> String {
    use std::os::unix::process::ExitStatusExt;
    use std::time::{Duration, Instant};
    let mut child = match cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return format!("cannot start the probe: {e}"),
    };
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > Duration::from_secs(120) => {
                let _ = child.kill();
                let _ = child.wait();
                return "hung (killed after 120 s)".into();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return format!("cannot wait for the probe: {e}"),
        }
    }
    let out = match child.wait_with_output() {
        Ok(o) => o,
        Err(e) => return format!("cannot read the probe: {e}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    if let Some(line) = stdout.lines().find_map(|l| l.strip_prefix(RESULT)) {
        return line.to_owned();
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A panic's message is the line after "panicked at"; else the last line said.
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let last = lines
        .iter()
        .position(|l| l.contains("panicked at"))
        .and_then(|i| lines.get(i + 1))
        .or(lines.last())
        .copied()
        .unwrap_or("");
    match out.status.signal() {
        Some(sig) => format!("crashed (signal {sig}): {last}"),
        None => format!("failed ({}): {last}", out.status),
    }
}
