//! The simulator's leak report in the suite: every test executable and example runs
//! with `CUDA_SIM_LEAK_REPORT` naming a file of its own, to which each of its
//! processes that used the simulator appends one line at exit (`crates/cuda-sim/src/leaks.rs`):
//! the streams, events, contexts, allocations, modules and graphs it still held.
//! Any count above zero is a leak, and fails the run.
//!
//! Nothing is exempt: the library keeps no CUDA object in a static, and each test
//! drops what it made before it returns, so a test executable ends holding nothing.
//! The exceptions are tests that leak on purpose (`mem::forget`), listed with what
//! they leak in [`super::LEAKS_BY_DESIGN`]: each runs in a process of its own, whose
//! report must count exactly that ([`unexpected`]). A process that exits without
//! writing a line (a crash, an abort) is not a leak: its tests fail anyway.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::{Context, Result};

/// One process's line.
#[derive(Debug, PartialEq, Eq)]
pub struct Report {
    /// Its process id.
    pub pid: u32,
    /// Each count, by name, in the line's order.
    pub counts: Vec<(String, u64)>,
    /// The program's path.
    pub exe: String,
}

impl Report {
    /// The counts above zero.
    pub fn leaked(&self) -> impl Iterator<Item = &(String, u64)> {
        self.counts.iter().filter(|(_, n)| *n > 0)
    }
}

/// The line's opening words.
const PREFIX: &str = "cuda-sim leak report: ";

/// Reads one line: `cuda-sim leak report: pid=N name=N ... exe=PATH`.
pub fn parse(line: &str) -> Result<Report> {
    let bad = || format!("not a leak report line: {line:?}");
    let rest = line.strip_prefix(PREFIX).ok_or_else(bad)?;
    let (fields, exe) = rest.split_once(" exe=").ok_or_else(bad)?;
    let mut pid = None;
    let mut counts = Vec::new();
    for field in fields.split(' ') {
        let (name, value) = field.split_once('=').ok_or_else(bad)?;
        let value: u64 = value.parse().map_err(|_| bad())?;
        if name == "pid" {
            pid = Some(u32::try_from(value).map_err(|_| bad())?);
        } else {
            counts.push((name.to_owned(), value));
        }
    }
    Ok(Report {
        pid: pid.ok_or_else(bad)?,
        counts,
        exe: exe.to_owned(),
    })
}

/// Every report in `path`, one per process. No file: no process used the simulator.
fn reports_in(path: &Path) -> Result<Vec<Report>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(format!("cannot read the leak report {}: {e}", path.display()).into())
        }
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| parse(l).with_context(|| format!("in {}", path.display())))
        .collect()
}

/// The reports in `path` that count a leak.
pub fn leaks_in(path: &Path) -> Result<Vec<Report>> {
    let mut reports = reports_in(path)?;
    reports.retain(|r| r.leaked().next().is_some());
    Ok(reports)
}

/// For a test that leaks by design, run alone (`label` names it): `None` when the
/// counts above zero in `path`, summed over its processes, are exactly `expected`;
/// otherwise what differs.
pub fn unexpected(label: &str, path: &Path, expected: &[(&str, u64)]) -> Result<Option<String>> {
    let reports = reports_in(path)?;
    let mut found: BTreeMap<&str, u64> = BTreeMap::new();
    for (name, n) in reports.iter().flat_map(Report::leaked) {
        *found.entry(name).or_default() += n;
    }
    let want: BTreeMap<&str, u64> = expected.iter().copied().collect();
    let show = |m: &BTreeMap<&str, u64>| {
        let counts: Vec<String> = m.iter().map(|(k, n)| format!("{k}={n}")).collect();
        if counts.is_empty() {
            "nothing".to_owned()
        } else {
            counts.join(", ")
        }
    };
    Ok(if reports.is_empty() {
        Some(format!(
            "{label}: no leak report in {} (it leaks {} by design)",
            path.display(),
            show(&want)
        ))
    } else if found != want {
        Some(format!(
            "{label} leaked {}, where by design it leaks {} (xtask/src/test_sim.rs, LEAKS_BY_DESIGN)",
            show(&found),
            show(&want)
        ))
    } else {
        None
    })
}

/// `NAME leaked: streams=1, events=2 (pid 42, /path/to/exe)`, one line per process.
pub fn describe(name: &str, leaks: &[Report]) -> String {
    let mut text = String::new();
    for r in leaks {
        let counts: Vec<String> = r.leaked().map(|(k, n)| format!("{k}={n}")).collect();
        let _ = writeln!(
            text,
            "{name} leaked: {} (pid {}, {})",
            counts.join(", "),
            r.pid,
            r.exe
        );
    }
    text.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: &str = "cuda-sim leak report: pid=7 streams=0 events=0 contexts=0 \
                         primary_contexts=0 device_allocs=0 exe=/t/my tests";

    #[test]
    fn reads_a_line_and_names_what_leaked() {
        let r = parse(CLEAN).unwrap();
        assert_eq!(r.pid, 7);
        assert_eq!(r.exe, "/t/my tests");
        assert_eq!(r.counts.len(), 5);
        assert_eq!(r.leaked().count(), 0);

        let leaky = CLEAN
            .replace("streams=0", "streams=2")
            .replace("device_allocs=0", "device_allocs=1");
        let r = parse(&leaky).unwrap();
        assert_eq!(
            describe("cuda-core-test-x", &[r]),
            "cuda-core-test-x leaked: streams=2, device_allocs=1 (pid 7, /t/my tests)"
        );
    }

    #[test]
    fn refuses_what_is_not_a_report() {
        for line in [
            "",
            "cuda-sim leak report: streams=0 exe=/t",
            "cuda-sim leak report: pid=7 streams=x exe=/t",
            "cuda-sim leak report: pid=7 streams=0",
            "something else",
        ] {
            assert!(parse(line).is_err(), "{line:?}");
        }
    }

    #[test]
    fn a_file_of_clean_and_leaky_processes() {
        let dir = std::env::temp_dir().join(format!("xtask-leaks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("report.txt");
        assert!(leaks_in(&path).unwrap().is_empty(), "no file, no leak");
        let leaky = CLEAN.replace("pid=7 streams=0", "pid=8 streams=1");
        std::fs::write(&path, format!("{CLEAN}\n{leaky}\n")).unwrap();
        let found = leaks_in(&path).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].pid, 8);
        std::fs::write(&path, "garbage\n").unwrap();
        assert!(leaks_in(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_leak_by_design_must_be_exactly_that() {
        let dir = std::env::temp_dir().join(format!("xtask-by-design-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("report.txt");
        let expected = [("streams", 1), ("primary_contexts", 1)];
        let missing = unexpected("t", &path, &expected).unwrap().unwrap();
        assert!(missing.contains("no leak report"), "{missing}");
        let leaky = CLEAN
            .replace("streams=0", "streams=1")
            .replace("primary_contexts=0", "primary_contexts=1");
        std::fs::write(&path, format!("{leaky}\n")).unwrap();
        assert_eq!(unexpected("t", &path, &expected).unwrap(), None);
        let more = leaky.replace("device_allocs=0", "device_allocs=3");
        std::fs::write(&path, format!("{more}\n")).unwrap();
        let text = unexpected("t", &path, &expected).unwrap().unwrap();
        assert!(
            text.contains("leaked device_allocs=3, primary_contexts=1, streams=1"),
            "{text}"
        );
        std::fs::write(&path, format!("{CLEAN}\n")).unwrap();
        let text = unexpected("t", &path, &expected).unwrap().unwrap();
        assert!(text.contains("leaked nothing"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
