//! Shared helpers for the benchmarks.
