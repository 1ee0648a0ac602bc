//! GPU tests of what queued work makes wait: no safe code may read, write or free
//! host or device memory while a queued copy still uses it (see the crate docs,
//! "Soundness of queued operations"). What must not compile is in
//! `tests/compile-fail/`; what must wait is here.
//!
//! Each test queues a large copy (64 MiB: about 1.2 ms on the link, against
//! microseconds for the host to reach the next line) and at once does what must
//! wait; then it checks the *data*: had the library not waited, the bytes compared
//! would be a mix of old and new. Destinations are pre-filled with other patterns.
//!
//! Every test needs a CUDA GPU and is `#[ignore]`d; run them with
//! `cargo xtask test-gpu` (or `cargo test -p cuda-core --test gpu_soundness --
//! --ignored`). Dropping a `DeviceBuffer` with a copy pending, which must record no
//! error, is in `gpu_deferred.rs` (it reads the process-wide error store).

mod common;

use common::*;
use cuda_core::{
    query_host_memory, DeviceBuffer, Event, HostMemory, HostRegistration, PinnedBuffer, Stream,
};

/// Elements of `u32` in 64 MiB.
const LEN: usize = 64 * MIB / 4;

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn dropping_a_pinned_buffer_right_after_queueing_an_upload_waits_for_it() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut d = device_with(&pattern::<u32>(LEN, seed("drop pinned", 0)));
    for round in 1..4 {
        let what = format!("round {round}: upload from a PinnedBuffer dropped at once");
        let mut p = PinnedBuffer::<u32>::alloc(LEN).expect("pinned");
        fill(&mut p, seed("drop pinned", round));
        let expected = p.to_vec();
        stream.memcpy_htod(&p, &mut d).expect("memcpy_htod");
        // Drop waits for the upload, then frees the pinned memory.
        drop(p);
        assert!(
            stream.query().expect("query"),
            "{what}: the upload was still running after the drop"
        );
        // Pinned memory handed out again (likely the same pages) holds other bytes.
        let mut reuse = PinnedBuffer::<u32>::alloc(LEN).expect("pinned");
        fill(&mut reuse, seed("drop pinned reuse", round));
        let mut back: Vec<u32> = pattern(LEN, seed("drop pinned back", round));
        stream
            .memcpy_dtoh_sync(&d, &mut back)
            .expect("memcpy_dtoh_sync");
        assert_same(&what, &expected, &back);
    }
    // The same through a view: the buffer's drop waits for copies queued through
    // its views too.
    let mut p = PinnedBuffer::<u32>::alloc(LEN).expect("pinned");
    fill(&mut p, seed("drop pinned view", 0));
    let expected = p.to_vec();
    {
        let (lo, hi) = p.split_at_mut(LEN / 3).expect("split_at_mut");
        stream
            .memcpy_htod(&hi, &mut d.slice_mut(LEN / 3..).expect("slice_mut"))
            .expect("memcpy_htod from a view");
        stream
            .memcpy_htod(&lo, &mut d.slice_mut(..LEN / 3).expect("slice_mut"))
            .expect("memcpy_htod from a view");
    }
    drop(p);
    assert!(
        stream.query().expect("query"),
        "uploads from views still running"
    );
    assert_device_holds("uploads from the views of a dropped buffer", &d, &expected);
}

/// One way to read pinned memory right after queueing a download into it.
type ReadCase = (
    &'static str,
    fn(&Stream, &DeviceBuffer<u32>, &mut PinnedBuffer<u32>, &[u32], &str),
);

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn reading_pinned_memory_right_after_queueing_a_download_sees_the_download() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut d = DeviceBuffer::<u32>::alloc(LEN).expect("alloc");
    let mut p = PinnedBuffer::<u32>::alloc(LEN).expect("pinned");
    let cases: [ReadCase; 10] = [
        ("PinnedBuffer Deref", |s, d, p, data, what| {
            s.memcpy_dtoh(d, p).expect("memcpy_dtoh");
            let got: &[u32] = p;
            assert_same(what, data, got);
        }),
        ("PinnedBuffer::as_slice", |s, d, p, data, what| {
            s.memcpy_dtoh(d, p).expect("memcpy_dtoh");
            assert_same(what, data, p.as_slice().expect("as_slice"));
        }),
        (
            "a PinnedView taken after queueing",
            |s, d, p, data, what| {
                s.memcpy_dtoh(d, p).expect("memcpy_dtoh");
                let view = p.slice(..).expect("slice");
                assert_same(what, data, &view);
            },
        ),
        ("PinnedViewMut Deref", |s, d, p, data, what| {
            let mut view = p.slice_mut(..).expect("slice_mut");
            s.memcpy_dtoh(d, &mut view).expect("memcpy_dtoh");
            assert_same(what, data, &view);
        }),
        ("PinnedViewMut::as_slice", |s, d, p, data, what| {
            let mut view = p.slice_mut(..).expect("slice_mut");
            s.memcpy_dtoh(d, &mut view).expect("memcpy_dtoh");
            assert_same(what, data, view.as_slice().expect("as_slice"));
        }),
        ("a PinnedView of a PinnedViewMut", |s, d, p, data, what| {
            let mut view = p.slice_mut(..).expect("slice_mut");
            s.memcpy_dtoh(d, &mut view).expect("memcpy_dtoh");
            let inner = view.slice(..).expect("PinnedViewMut::slice");
            assert_same(what, data, &inner);
        }),
        ("the halves of split_at_mut", |s, d, p, data, what| {
            let mid = LEN / 2 + 1;
            let (mut a, mut b) = p.split_at_mut(mid).expect("split_at_mut");
            s.memcpy_dtoh(&d.slice(..mid).expect("slice"), &mut a)
                .expect("memcpy_dtoh");
            s.memcpy_dtoh(&d.slice(mid..).expect("slice"), &mut b)
                .expect("memcpy_dtoh");
            assert_same(what, &data[mid..], &b);
            assert_same(what, &data[..mid], &a);
        }),
        // A writable view starts with the pending copies of what it was taken from.
        (
            "a PinnedViewMut taken after queueing",
            |s, d, p, data, what| {
                s.memcpy_dtoh(d, p).expect("memcpy_dtoh");
                let view = p.slice_mut(..).expect("slice_mut");
                assert_same(what, data, &view);
            },
        ),
        (
            "the halves of split_at_mut taken after queueing",
            |s, d, p, data, what| {
                s.memcpy_dtoh(d, p).expect("memcpy_dtoh");
                let mid = LEN / 3;
                let (a, b) = p.split_at_mut(mid).expect("split_at_mut");
                assert_same(what, &data[mid..], &b);
                assert_same(what, &data[..mid], &a);
            },
        ),
        (
            "the halves of a PinnedViewMut split after queueing through it",
            |s, d, p, data, what| {
                let mut view = p.slice_mut(..).expect("slice_mut");
                s.memcpy_dtoh(d, &mut view).expect("memcpy_dtoh");
                let mid = LEN / 4;
                let (a, b) = view.split_at(mid).expect("PinnedViewMut::split_at");
                assert_same(what, &data[mid..], &b);
                assert_same(what, &data[..mid], &a);
            },
        ),
    ];
    for (round, (how, case)) in cases.into_iter().enumerate() {
        let what = format!("read through {how} right after a queued download");
        let data: Vec<u32> = pattern(LEN, seed("read after download", round));
        d.copy_from_host(&data).expect("copy_from_host");
        fill(&mut p, seed("read after download garbage", round));
        case(&stream, &d, &mut p, &data, &what);
    }
}

/// One way to write pinned memory right after queueing an upload from it; returns
/// what it wrote.
type WriteCase = (
    &'static str,
    fn(&Stream, &mut DeviceBuffer<u32>, &mut PinnedBuffer<u32>, u64) -> Vec<u32>,
);

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn writing_pinned_memory_right_after_queueing_an_upload_leaves_the_device_the_old_data() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut d = DeviceBuffer::<u32>::alloc(LEN).expect("alloc");
    let mut p = PinnedBuffer::<u32>::alloc(LEN).expect("pinned");
    let cases: [WriteCase; 6] = [
        ("PinnedBuffer DerefMut", |s, d, p, new| {
            s.memcpy_htod(p, d).expect("memcpy_htod");
            fill(p, new);
            p.to_vec()
        }),
        ("PinnedBuffer::as_mut_slice", |s, d, p, new| {
            s.memcpy_htod(p, d).expect("memcpy_htod");
            fill(p.as_mut_slice().expect("as_mut_slice"), new);
            p.to_vec()
        }),
        (
            "PinnedBuffer DerefMut after a PinnedView's upload",
            |s, d, p, new| {
                s.memcpy_htod(&p.slice(..).expect("slice"), d)
                    .expect("memcpy_htod");
                fill(p, new);
                p.to_vec()
            },
        ),
        ("PinnedViewMut DerefMut", |s, d, p, new| {
            let mut view = p.slice_mut(..).expect("slice_mut");
            s.memcpy_htod(&view, d).expect("memcpy_htod");
            fill(&mut view, new);
            view.to_vec()
        }),
        ("PinnedViewMut::as_mut_slice", |s, d, p, new| {
            let mut view = p.slice_mut(..).expect("slice_mut");
            s.memcpy_htod(&view.slice(..).expect("slice"), d)
                .expect("memcpy_htod");
            fill(view.as_mut_slice().expect("as_mut_slice"), new);
            view.to_vec()
        }),
        ("the halves of split_at_mut", |s, d, p, new| {
            let mid = LEN / 2 - 1;
            let (mut a, mut b) = p.split_at_mut(mid).expect("split_at_mut");
            s.memcpy_htod(&a, &mut d.slice_mut(..mid).expect("slice_mut"))
                .expect("memcpy_htod");
            s.memcpy_htod(&b, &mut d.slice_mut(mid..).expect("slice_mut"))
                .expect("memcpy_htod");
            fill(&mut a, new);
            fill(&mut b, !new);
            drop((a, b));
            p.to_vec()
        }),
    ];
    for (round, (how, case)) in cases.into_iter().enumerate() {
        let what = format!("write through {how} right after a queued upload");
        fill(&mut p, seed("write after upload old", round));
        let old = p.to_vec();
        let written = case(
            &stream,
            &mut d,
            &mut p,
            seed("write after upload new", round),
        );
        assert_device_holds(&format!("{what}: the device"), &d, &old);
        assert_same(&format!("{what}: the host"), &written, &p);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_buffer_busy_on_one_stream_is_used_correctly_on_another() {
    let ctx = gpu();
    let (s1, s2) = (
        Stream::new(&ctx).expect("Stream::new"),
        Stream::new(&ctx).expect("Stream::new"),
    );
    let old: Vec<u32> = pattern(LEN, seed("two streams", 0));
    let mut d = device_with(&old);
    let mut up = PinnedBuffer::<u32>::alloc(LEN).expect("pinned");
    let mut down = PinnedBuffer::<u32>::alloc(LEN).expect("pinned");
    for round in 0..2 {
        let tag = |what: &str| format!("round {round}: {what}");
        let new: Vec<u32> = pattern(LEN, seed("two streams new", round));
        let newer: Vec<u32> = pattern(LEN, seed("two streams newer", round));

        // Read after write: s1 uploads into `d`, s2 downloads `d` at once.
        up.copy_from_slice(&new);
        fill(&mut down, seed("two streams garbage", round));
        s1.memcpy_htod(&up, &mut d).expect("s1: memcpy_htod");
        s2.memcpy_dtoh(&d, &mut down).expect("s2: memcpy_dtoh");
        assert_same(&tag("s2 downloads what s1 uploaded"), &new, &down);

        // Write after read: s1 downloads `d`, s2 uploads into it at once.
        up.copy_from_slice(&newer);
        fill(&mut down, seed("two streams garbage 2", round));
        s1.memcpy_dtoh(&d, &mut down).expect("s1: memcpy_dtoh");
        s2.memcpy_htod(&up, &mut d).expect("s2: memcpy_htod");
        assert_same(&tag("s1's download is not overwritten by s2"), &new, &down);
        assert_device_holds(&tag("s2's upload lands after s1's download"), &d, &newer);

        // Pinned memory on two streams: s1 uploads from `up`, s2 downloads into
        // `up` at once (write after read on the host side).
        let mut d2 = device_with(&old);
        let other = device_with(&new);
        s1.memcpy_htod(&up, &mut d2).expect("s1: memcpy_htod");
        s2.memcpy_dtoh(&other, &mut up).expect("s2: memcpy_dtoh");
        assert_device_holds(
            &tag("s1 uploads the pinned bytes before s2 overwrites them"),
            &d2,
            &newer,
        );
        assert_same(&tag("s2's download into the pinned buffer"), &new, &up);

        // A memset on s1, a device copy on s2.
        let mut d3 = device_with(&old);
        let value = 0x3f80_0000 ^ round as u32;
        s1.memset_u32(&mut d, value).expect("s1: memset_u32");
        s2.memcpy_dtod(&d, &mut d3).expect("s2: memcpy_dtod");
        let back = device_contents(&d3);
        if let Some(i) = back.iter().position(|&x| x != value) {
            panic!(
                "{}: element {i} is {:#x}",
                tag("s2 copies what s1 set"),
                back[i]
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn split_halves_of_a_pinned_buffer_are_filled_and_copied_independently() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let n = LEN;
    let mut p = PinnedBuffer::<u32>::alloc(2 * n).expect("pinned");
    let mut da = DeviceBuffer::<u32>::alloc(n).expect("alloc");
    let mut db = DeviceBuffer::<u32>::alloc(n).expect("alloc");
    let (mut a, mut b) = p.split_at_mut(n).expect("split_at_mut");
    assert!(a.is_idle() && b.is_idle(), "nothing queued yet");

    fill(&mut a, seed("halves", 0));
    let a0 = a.to_vec();
    // 4 x 64 MiB from `a`: milliseconds of work.
    for _ in 0..4 {
        stream.memcpy_htod(&a, &mut da).expect("memcpy_htod from a");
    }
    assert!(!a.is_idle(), "uploads from a are queued");
    assert!(b.is_idle(), "nothing was queued through b");

    // Writing b does not wait for a's uploads: the stream is still busy after it.
    let b_start: Vec<u32> = pattern(4096, seed("halves", 1));
    b.as_mut_slice().expect("as_mut_slice")[..4096].copy_from_slice(&b_start);
    assert!(
        !stream.query().expect("query"),
        "writing half b waited for the uploads from half a"
    );
    fill(&mut b[4096..], seed("halves", 2));
    let b0 = b.to_vec();
    assert_same("b's first elements", &b_start, &b0[..4096]);
    stream.memcpy_htod(&b, &mut db).expect("memcpy_htod from b");

    // Writing a waits for a's uploads: da gets a0, though a is overwritten at once.
    fill(&mut a, seed("halves", 3));
    assert_device_holds("da: uploaded from a before a was rewritten", &da, &a0);
    assert_device_holds("db: uploaded from b", &db, &b0);

    // Downloads into a while b is rewritten: reading a sees the download.
    let a_dev: Vec<u32> = pattern(n, seed("halves", 4));
    da.copy_from_host(&a_dev).expect("copy_from_host");
    stream.memcpy_dtoh(&da, &mut a).expect("memcpy_dtoh into a");
    fill(&mut b, seed("halves", 5));
    let b1 = b.to_vec();
    assert_same("a after a download into it", &a_dev, &a);
    drop((a, b));
    // The whole buffer holds both halves.
    assert_same("p[..n]", &a_dev, &p[..n]);
    assert_same("p[n..]", &b1, &p[n..]);

    // A double-buffered frame loop: fill one half while the other's upload runs.
    let frames = 6;
    let mut devs: Vec<DeviceBuffer<u32>> = (0..frames)
        .map(|_| DeviceBuffer::<u32>::alloc(n).expect("alloc"))
        .collect();
    let mut sent: Vec<Vec<u32>> = Vec::new();
    let (mut a, mut b) = p.split_at_mut(n).expect("split_at_mut");
    for (k, dev) in devs.iter_mut().enumerate() {
        let half = if k % 2 == 0 { &mut a } else { &mut b };
        // Waits only for this half's previous upload.
        fill(
            half.as_mut_slice().expect("as_mut_slice"),
            seed("frames", k),
        );
        sent.push(half.to_vec());
        stream.memcpy_htod(&*half, dev).expect("memcpy_htod");
    }
    drop((a, b));
    for (k, (dev, data)) in devs.iter().zip(&sent).enumerate() {
        assert_device_holds(&format!("frame {k}"), dev, data);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_pinned_view_is_idle_once_a_synchronisation_has_seen_its_copies_complete() {
    // `PinnedViewMut::is_idle`: "a copy counts as running until a synchronisation
    // through this crate has seen it complete". Each synchronisation below is the
    // only thing between queueing and asking: no host access to the view.
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut p = PinnedBuffer::<u32>::alloc(2 * LEN).expect("pinned");
    let mut d = DeviceBuffer::<u32>::alloc(LEN).expect("alloc");
    let mut event = Event::new(&ctx).expect("Event::new");
    let (mut a, _b) = p.split_at_mut(LEN).expect("split_at_mut");

    stream.memcpy_htod(&a, &mut d).expect("memcpy_htod");
    assert!(!a.is_idle(), "right after queueing");
    a.wait().expect("wait");
    assert!(a.is_idle(), "after PinnedViewMut::wait");

    stream.memcpy_htod(&a, &mut d).expect("memcpy_htod");
    assert!(!a.is_idle(), "right after queueing");
    stream.synchronize().expect("synchronize");
    assert!(a.is_idle(), "after Stream::synchronize");

    stream.memcpy_dtoh(&d, &mut a).expect("memcpy_dtoh");
    event.record(&stream).expect("record");
    assert!(!a.is_idle(), "right after queueing");
    event.synchronize().expect("event synchronize");
    assert!(a.is_idle(), "after Event::synchronize");

    stream.memcpy_htod(&a, &mut d).expect("memcpy_htod");
    assert!(!a.is_idle(), "right after queueing");
    while !stream.query().expect("query") {
        std::thread::yield_now();
    }
    assert!(a.is_idle(), "after Stream::query answered true");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_pinned_buffer_is_idle_once_its_wait_returns() {
    // `PinnedBuffer::wait` waits for every queued copy that uses the buffer, one
    // reading it and one writing it; nothing else synchronises in between.
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut p = PinnedBuffer::<u32>::alloc(LEN).expect("pinned");
    let mut d = DeviceBuffer::<u32>::alloc(LEN).expect("alloc");

    stream.memcpy_htod(&p, &mut d).expect("memcpy_htod");
    assert!(!p.is_idle(), "right after queueing an upload from it");
    p.wait().expect("wait");
    assert!(p.is_idle(), "after PinnedBuffer::wait, the upload from it");

    stream.memcpy_dtoh(&d, &mut p).expect("memcpy_dtoh");
    assert!(!p.is_idle(), "right after queueing a download into it");
    p.wait().expect("wait");
    assert!(
        p.is_idle(),
        "after PinnedBuffer::wait, the download into it"
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_device_buffer_is_idle_once_its_wait_returns() {
    // `DeviceBuffer::wait` waits for every queued copy that uses the buffer, one
    // writing it and one reading it; nothing else synchronises in between. The
    // pinned side's `is_idle` makes no driver call: a copy counts as running until
    // a wait through this crate has seen it complete.
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut p = PinnedBuffer::<u32>::alloc(LEN).expect("pinned");
    let mut d = DeviceBuffer::<u32>::alloc(LEN).expect("alloc");

    stream.memcpy_htod(&p, &mut d).expect("memcpy_htod");
    assert!(!p.is_idle(), "right after queueing an upload into it");
    d.wait().expect("wait");
    assert!(p.is_idle(), "after DeviceBuffer::wait, the upload into it");

    stream.memcpy_dtoh(&d, &mut p).expect("memcpy_dtoh");
    assert!(!p.is_idle(), "right after queueing a download from it");
    d.wait().expect("wait");
    assert!(
        p.is_idle(),
        "after DeviceBuffer::wait, the download from it"
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_static_host_registration_takes_queued_copies_both_ways() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    // Queued copies need memory the borrow checker cannot free early: a leaked Box
    // (left leaked at the end of the test).
    let mem: &'static mut [u32] = Box::leak(pattern(LEN, seed("static reg", 0)).into_boxed_slice());
    let mut reg = HostRegistration::new(&ctx, mem).expect("register");
    assert!(
        matches!(
            query_host_memory(&ctx, reg.as_ptr().cast()),
            HostMemory::PageLocked { .. }
        ),
        "a registration is page-locked"
    );
    let mut d = DeviceBuffer::<u32>::alloc(LEN).expect("alloc");

    // Upload, then write at once: the device gets the old data.
    let old = reg.to_vec();
    stream.memcpy_htod(&reg, &mut d).expect("memcpy_htod");
    fill(&mut reg, seed("static reg", 1));
    assert_device_holds("upload from a registration rewritten at once", &d, &old);

    // Download, then read at once: the host sees the download.
    let data: Vec<u32> = pattern(LEN, seed("static reg", 2));
    d.copy_from_host(&data).expect("copy_from_host");
    stream.memcpy_dtoh(&d, &mut reg).expect("memcpy_dtoh");
    assert_same("registration read right after a download", &data, &reg);

    // Through a view of the device buffer, at an odd offset.
    let mut d2 = device_with(&pattern::<u32>(LEN + 3, seed("static reg", 3)));
    let mut expected = device_contents(&d2);
    stream
        .memcpy_htod(&reg, &mut d2.slice_mut(3..).expect("slice_mut"))
        .expect("memcpy_htod into a view");
    expected[3..].copy_from_slice(&data);
    // Dropping the registration right after queueing waits for the upload before it
    // unregisters.
    drop(reg);
    assert!(
        stream.query().expect("query"),
        "the upload outlived the drop"
    );
    assert_device_holds("upload from a registration dropped at once", &d2, &expected);

    // `unregister` waits for a queued download, then gives the memory back.
    let mem: &'static mut [u32] = Box::leak(pattern(LEN, seed("static reg", 4)).into_boxed_slice());
    let mut reg = HostRegistration::new(&ctx, mem).expect("register");
    let data: Vec<u32> = pattern(LEN, seed("static reg", 5));
    d.copy_from_host(&data).expect("copy_from_host");
    stream.memcpy_dtoh(&d, &mut reg).expect("memcpy_dtoh");
    let mem = reg.unregister().expect("unregister");
    assert_same("memory given back by unregister", &data, mem);
    assert_eq!(
        query_host_memory(&ctx, mem.as_ptr().cast()),
        HostMemory::Other,
        "unregistered"
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn synchronous_copies_wait_for_queued_work_on_the_buffer() {
    // `copy_from_host` / `copy_to_host` run on the legacy default stream, which does
    // not wait for a non-blocking stream: the buffer's record makes them wait.
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut p = PinnedBuffer::<u32>::alloc(LEN).expect("pinned");
    for round in 0..3 {
        let old: Vec<u32> = pattern(LEN, seed("sync after queued", 3 * round));
        let new: Vec<u32> = pattern(LEN, seed("sync after queued", 3 * round + 1));
        let mut d = device_with(&old);

        // A queued download from `d`, then at once a synchronous upload into it: the
        // download gets the old data.
        fill(&mut p, seed("sync after queued garbage", round));
        stream.memcpy_dtoh(&d, &mut p).expect("memcpy_dtoh");
        d.copy_from_host(&new).expect("copy_from_host");
        assert_same("queued download before copy_from_host", &old, &p);
        assert_device_holds("copy_from_host after a queued download", &d, &new);

        // A queued upload into `d`, then at once a synchronous read: it sees the
        // upload.
        fill(&mut p, seed("sync after queued", 3 * round + 2));
        stream.memcpy_htod(&p, &mut d).expect("memcpy_htod");
        let mut back: Vec<u32> = pattern(LEN, seed("sync after queued back", round));
        d.copy_to_host(&mut back).expect("copy_to_host");
        assert_same("copy_to_host after a queued upload", &p, &back);
    }
}
