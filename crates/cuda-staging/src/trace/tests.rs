//! The route labels, with or without the feature; with it, the elapsed time's
//! rounding and the span's name, target,
//! level and fields as a subscriber sees them (no GPU: the span is driven by hand
//! as the transfers drive it; `tests/route_tracing.rs` checks the real transfers on
//! a GPU).

use super::*;

#[test]
fn routes_are_labelled_as_documented() {
    let cases = [
        (SpanRoute::Driver, "driver"),
        (SpanRoute::PageLocked, "page-locked"),
        (SpanRoute::staged(1), "staged"),
        (SpanRoute::staged(2), "pipelined"),
        (SpanRoute::staged(8), "pipelined"),
        (SpanRoute::Batched, "batched"),
        (SpanRoute::Ring, "ring"),
    ];
    for (route, label) in cases {
        assert_eq!(route.label(), label, "{route:?}");
    }
    assert_eq!(direction_label(Direction::HostToDevice), "h2d");
    assert_eq!(direction_label(Direction::DeviceToHost), "d2h");
}

#[cfg(feature = "tracing")]
#[test]
fn elapsed_time_is_in_microseconds_to_a_tenth() {
    use std::time::Duration;
    assert_eq!(tenths_of_us(Duration::ZERO), 0.0);
    assert_eq!(tenths_of_us(Duration::from_nanos(31_249)), 31.2);
    assert_eq!(tenths_of_us(Duration::from_nanos(31_250)), 31.3);
    assert_eq!(tenths_of_us(Duration::from_micros(4_915)), 4915.0);
}

/// Without the feature there is nothing to a span: no field, no `Drop`.
#[cfg(not(feature = "tracing"))]
#[test]
fn without_the_feature_a_span_is_nothing() {
    assert_eq!(std::mem::size_of::<TransferSpan>(), 0);
    assert!(!std::mem::needs_drop::<TransferSpan>());
}

#[cfg(feature = "tracing")]
#[path = "../../tests/spans/mod.rs"]
pub(crate) mod spans;

#[cfg(feature = "tracing")]
mod with_the_feature {
    use super::spans::{capture, transfers, SpanRecord, Value};
    use super::*;
    use Value::{Bool, Str, U64};

    /// Checks that `span` was recorded with exactly `want` (and `elapsed_us`), each
    /// field once.
    #[track_caller]
    fn check(span: &SpanRecord, want: &[(&str, Value)]) {
        assert_eq!(
            (span.name, span.target, span.level),
            ("transfer", "cuda_staging", tracing::Level::DEBUG)
        );
        for (field, value) in want {
            assert_eq!(span.fields.get(field), Some(value), "{field} of {span:?}");
        }
        let elapsed = span.f64("elapsed_us").expect("elapsed_us");
        assert!((0.0..60e6).contains(&elapsed), "{span:?}");
        let mut names: Vec<&str> = want.iter().map(|(f, _)| *f).collect();
        names.push("elapsed_us");
        names.sort_unstable();
        let recorded: Vec<&str> = span.fields.keys().copied().collect();
        assert_eq!(recorded, names, "no other field: {span:?}");
        assert!(
            span.recorded.values().all(|&n| n == 1),
            "each field once (a formatting subscriber shows a field recorded twice twice): {span:?}"
        );
    }

    fn s(v: &str) -> Value {
        Str(v.to_owned())
    }

    #[test]
    fn a_pipelined_download_shows_its_route_chunks_and_threads() {
        let pool = crate::pool::Pool::new(4, 0);
        let ((), spans) = capture(|| {
            let mut span = TransferSpan::start("download", Direction::DeviceToHost, 4_915_200);
            assert!(span.is_recorded());
            span.staged(8);
            span.copied(Copier::over(&pool, 4, 3), 614_400);
            span.succeeded();
        });
        let t = transfers(&spans);
        assert_eq!(t.len(), 1, "{spans:?}");
        check(
            t[0],
            &[
                ("op", s("download")),
                ("direction", s("d2h")),
                ("bytes", U64(4_915_200)),
                ("route", s("pipelined")),
                ("chunks", U64(8)),
                ("copy_threads", U64(4)),
                ("helpers", U64(3)),
            ],
        );
    }

    #[test]
    fn a_staged_upload_in_one_piece_on_the_callers_thread() {
        let ((), spans) = capture(|| {
            let mut span = TransferSpan::start("upload", Direction::HostToDevice, 150_528);
            span.staged(1);
            span.copied(Copier::solo(), 150_528);
            span.succeeded();
        });
        check(
            transfers(&spans)[0],
            &[
                ("op", s("upload")),
                ("direction", s("h2d")),
                ("bytes", U64(150_528)),
                ("route", s("staged")),
                ("chunks", U64(1)),
                ("copy_threads", U64(1)),
                ("helpers", U64(0)),
            ],
        );
    }

    #[test]
    fn a_batch_shows_its_parts_and_its_largest_copy() {
        let pool = crate::pool::Pool::new(4, 0);
        let ((), spans) = capture(|| {
            let mut span = TransferSpan::start("upload_batch", Direction::HostToDevice, 172_032);
            span.route(SpanRoute::Batched);
            span.parts(3);
            // 4 KiB alone, 16 KiB alone, 150528 B over four threads.
            span.copied_parts(Copier::over(&pool, 4, 3), &[4096, 150_528, 16_384]);
            span.succeeded();
        });
        check(
            transfers(&spans)[0],
            &[
                ("op", s("upload_batch")),
                ("direction", s("h2d")),
                ("bytes", U64(172_032)),
                ("route", s("batched")),
                ("parts", U64(3)),
                ("copy_threads", U64(4)),
                ("helpers", U64(3)),
            ],
        );
    }

    #[test]
    fn a_transfer_that_fails_says_so() {
        let ((), spans) = capture(|| {
            // Dropped without succeeding: an error returned early, or a panic.
            let span = TransferSpan::start("StagingRing::download", Direction::DeviceToHost, 64);
            span.route(SpanRoute::Ring);
            span.no_copy();
            drop(span);
            // One marked done.
            let mut span = TransferSpan::start("download_into", Direction::DeviceToHost, 16);
            span.route(SpanRoute::Staged);
            span.succeeded();
        });
        let t = transfers(&spans);
        assert_eq!(t.len(), 2, "{spans:?}");
        check(
            t[0],
            &[
                ("op", s("StagingRing::download")),
                ("direction", s("d2h")),
                ("bytes", U64(64)),
                ("route", s("ring")),
                ("copy_threads", U64(0)),
                ("helpers", U64(0)),
                ("failed", Bool(true)),
            ],
        );
        assert_eq!(t[1].bool("failed"), None, "{:?}", t[1]);
        assert_eq!(t[1].str("route"), Some("staged"));
    }

    #[test]
    fn a_panic_inside_the_span_still_closes_it_with_its_time() {
        let (r, spans) = capture(|| {
            std::panic::catch_unwind(|| {
                let span = TransferSpan::start("upload_with", Direction::HostToDevice, 4096);
                span.route(SpanRoute::Staged);
                panic!("fill panicked");
            })
        });
        assert!(r.is_err());
        let t = transfers(&spans);
        assert_eq!(t.len(), 1, "{spans:?}");
        assert_eq!(t[0].bool("failed"), Some(true));
        assert!(t[0].f64("elapsed_us").is_some());
    }

    #[test]
    fn a_subscriber_that_wants_less_than_debug_gets_no_span() {
        use tracing_subscriber::layer::SubscriberExt;
        let info = tracing_subscriber::registry().with(tracing::level_filters::LevelFilter::INFO);
        let recorded = tracing::subscriber::with_default(info, || {
            TransferSpan::start("upload", Direction::HostToDevice, 1 << 20).is_recorded()
        });
        assert!(!recorded, "an INFO subscriber must leave the span disabled");
    }
}
