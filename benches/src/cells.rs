//! Which cells a bench executable measures: all of them, or those that
//! `BENCH_CELLS` names (`cargo xtask bench --ab` runs a few cells of every executable
//! many times, so that two builds can be compared in one device call).
//!
//! A cell is named by its scenario, then what varies inside it, joined by `/`:
//!
//! | executable | cell names |
//! |---|---|
//! | `transfers` | `back-to-back/H2D/150528/copy-in` (one criterion benchmark) |
//! | `frames` | `sleep-2ms/D2H/1048576`, `tight-loop/H2D/150528`, `contended/…` (every column of the cell runs, interleaved), `four-pipelines`, `scaling` |
//! | `pipeline` | `pipeline`, `pipeline-gpu-heavy`, `batch`, `behind-work` |
//! | `pitched` | `pitched` |
//!
//! `BENCH_CELLS` is a comma list of patterns; `*` matches any run of characters
//! (slashes too). A pattern names a cell when it matches the whole name, or a
//! leading part of it up to a `/`: `sleep-2ms` names every cell of that scenario,
//! `*/4915200` every cell at that size. Unset or empty, every cell runs.

/// The environment variable holding the patterns.
pub const CELLS_ENV: &str = "BENCH_CELLS";

/// The cells to measure ([`CellFilter::matches`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CellFilter {
    /// The patterns; none means every cell.
    patterns: Vec<String>,
}

impl CellFilter {
    /// Every cell.
    pub fn all() -> CellFilter {
        CellFilter::default()
    }

    /// The cells a comma list of patterns names (see the module docs); `None`, empty
    /// or only commas and spaces: every cell.
    pub fn parse(list: Option<&str>) -> CellFilter {
        let patterns = list
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect();
        CellFilter { patterns }
    }

    /// The cells `BENCH_CELLS` names.
    pub fn from_env() -> CellFilter {
        CellFilter::parse(std::env::var(CELLS_ENV).ok().as_deref())
    }

    /// Whether every cell runs (no pattern was given).
    pub fn is_all(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether the cell `name` is measured.
    pub fn matches(&self, name: &str) -> bool {
        self.is_all()
            || self.patterns.iter().any(|p| {
                glob(p.as_bytes(), name.as_bytes())
                    || name
                        .match_indices('/')
                        .any(|(i, _)| glob(p.as_bytes(), &name.as_bytes()[..i]))
            })
    }

    /// Whether any of `names` is measured.
    pub fn any<S: AsRef<str>>(&self, names: impl IntoIterator<Item = S>) -> bool {
        names.into_iter().any(|n| self.matches(n.as_ref()))
    }
}

/// The name of a cell of a scenario measured per direction and size.
pub fn cell_name(scenario: &str, direction: &str, bytes: usize) -> String {
    format!("{scenario}/{direction}/{bytes}")
}

/// Whether `pattern` (with `*` for any run of bytes) matches all of `text`.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    // The classic two-pointer match: on a mismatch, let the last `*` take one more byte.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_pattern_names_every_cell() {
        for list in [None, Some(""), Some(" , ,")] {
            let f = CellFilter::parse(list);
            assert!(f.is_all());
            assert!(f.matches("sleep-2ms/H2D/150528"));
            assert!(f.matches("batch"));
        }
    }

    #[test]
    fn a_pattern_names_whole_names_or_leading_parts() {
        let f = CellFilter::parse(Some(
            "sleep-2ms/*/1048576, back-to-back/H2D/150528/copy-in,batch",
        ));
        assert!(!f.is_all());
        assert!(f.matches("sleep-2ms/H2D/1048576"));
        assert!(f.matches("sleep-2ms/D2H/1048576"));
        assert!(!f.matches("sleep-2ms/D2H/10485760"));
        assert!(!f.matches("sleep-16ms/D2H/1048576"));
        assert!(f.matches("back-to-back/H2D/150528/copy-in"));
        assert!(!f.matches("back-to-back/H2D/150528/copy-in-registered"));
        assert!(!f.matches("back-to-back/D2H/150528/copy-in"));
        assert!(f.matches("batch"));
        assert!(!f.matches("batches"));
        assert!(!f.matches("pipeline"));

        // A leading part, up to a slash.
        let f = CellFilter::parse(Some("tight-loop"));
        assert!(f.matches("tight-loop/H2D/150528"));
        assert!(!f.matches("tight-loop-2/H2D/150528"));
        assert!(!f.matches("contended/H2D/150528"));
        let f = CellFilter::parse(Some("*/4915200"));
        assert!(f.matches("contended/D2H/4915200"));
        assert!(f.matches("back-to-back/H2D/4915200/resident"));
        assert!(!f.matches("contended/D2H/49152000"));
        assert!(f.any(["x", "sleep-16ms/H2D/4915200"]));
        assert!(!f.any(["x", "y"]));
    }

    #[test]
    fn glob_stars_match_any_run() {
        assert!(glob(b"*", b""));
        assert!(glob(b"*", b"a/b/c"));
        assert!(glob(b"a*c", b"abbbc"));
        assert!(glob(b"a*c*", b"ac"));
        assert!(!glob(b"a*c", b"abcb"));
        assert!(glob(b"*b*b", b"abab"));
        assert!(!glob(b"ab", b"a"));
        assert!(!glob(b"", b"a"));
        assert_eq!(
            cell_name("sleep-2ms", "H2D", 150_528),
            "sleep-2ms/H2D/150528"
        );
    }
}
