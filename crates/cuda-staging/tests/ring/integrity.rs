//! Integrity at every size and around slot reuse and growth.

use super::*;

/// The sizes of issue 13's list, in bytes: one element, 4 KiB, 112x112x3 f32,
/// 1 MiB + 1, 640x640x3 f32. Types whose size does not divide one move the next
/// whole element count up.
const SIZES_BYTES: [usize; 5] = [0, 4 * KIB, 150_528, MIB + 1, 4_915_200];

/// Element counts of [`SIZES_BYTES`] for `T` (0 stands for one element).
fn sizes<T>() -> [usize; 5] {
    SIZES_BYTES.map(|b| if b == 0 { 1 } else { elems_for::<T>(b) })
}

/// Per size, ascending, then descending: `upload_with`, `download`, `upload` on a ring
/// of three slots, so slots are reused 5 times over and grow on the way up; every
/// element checked, and the way down allocates nothing.
fn integrity<T: Pattern>() {
    let (_ctx, stream) = gpu();
    let name = std::any::type_name::<T>();
    let mut ring = StagingRing::new();
    let mut want = RingStats::default();
    let elem = std::mem::size_of::<T>() as u64;
    let pass = |ring: &mut StagingRing, n: usize, want: &mut RingStats| {
        // Device buffers one element longer than the transfer: the extra element keeps
        // its own pattern (a prefix transfer at every size).
        let (s_with, s_down, s_up, s_rest) = (seed(), seed(), seed(), seed());
        let mut d_with = device_with::<T>(n + 1, s_rest);
        let d_down = device_with::<T>(n + 1, s_down);
        let mut d_up = device_with::<T>(n + 1, s_rest);
        let src = pattern::<T>(n, s_up);

        ring.upload_with(&mut d_with, n, &stream, |px| {
            assert_eq!(px.len(), n, "fill gets exactly n elements");
            fill_pattern(px, s_with);
        })
        .expect("upload_with");
        let t = ring.download(&d_down, n, &stream).expect("download");
        assert_eq!(t.len(), n);
        ring.upload(&mut d_up, &src, &stream).expect("upload");
        drop(src);

        let got = ring.wait(&t).expect("wait");
        assert_eq!(got.len(), n);
        check(&format_args!("{name} download of {n}"), got, s_down);
        // Redeeming again gives the same bytes.
        check(
            &format_args!("{name} download of {n}, second wait"),
            ring.wait(&t).expect("wait again"),
            s_down,
        );
        let back = device_contents(&d_with);
        check(
            &format_args!("{name} upload_with of {n}"),
            &back[..n],
            s_with,
        );
        check_at(
            &format_args!("{name} past upload_with"),
            &back[n..],
            n,
            s_rest,
        );
        let back = device_contents(&d_up);
        check(&format_args!("{name} upload of {n}"), &back[..n], s_up);
        check_at(&format_args!("{name} past upload"), &back[n..], n, s_rest);

        want.uploads += 2;
        want.downloads += 1;
        want.bytes_uploaded += 2 * n as u64 * elem;
        want.bytes_downloaded += n as u64 * elem;
    };

    for n in sizes::<T>() {
        pass(&mut ring, n, &mut want);
        let got = ring.stats();
        assert!(
            got.allocations <= 3 * 5,
            "{name}: at most one growth per slot and size: {got:?}"
        );
        assert!(
            ring.capacity() >= 3 * n * elem as usize,
            "{name}: three slots hold {n} elements each"
        );
    }
    let grown = ring.stats();
    assert!(grown.allocations >= 3, "each slot pinned: {grown:?}");
    assert_eq!(grown.slot_waits, 0, "every slot was redeemed: {grown:?}");
    want.allocations = grown.allocations;
    assert_eq!(grown, want);

    let capacity = ring.capacity();
    for n in sizes::<T>().into_iter().rev() {
        pass(&mut ring, n, &mut want);
    }
    assert_eq!(ring.stats(), want, "{name}: smaller sizes reuse the slots");
    assert_eq!(ring.capacity(), capacity, "{name}");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn every_size_moves_intact_f32() {
    integrity::<f32>();
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn every_size_moves_intact_3_byte_elements() {
    integrity::<[u8; 3]>();
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn every_size_moves_intact_bytes() {
    integrity::<u8>();
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn tickets_in_flight_keep_their_own_data_across_types_and_slot_reuse() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut ring = StagingRing::with_config(cuda_staging::RingConfig {
        slots: 4,
        ..Default::default()
    })
    .unwrap();
    warm(&mut ring, &stream, MIB + 1);
    let warmed = ring.stats();
    let (n_f, n_b, n_r, n_u) = (150_528 / 4, MIB + 1, elems_for::<[u8; 3]>(4 * KIB), 1);

    for round in 0..3 {
        let seeds = [seed(), seed(), seed(), seed()];
        let d_f = device_with::<f32>(n_f, seeds[0]);
        let d_b = device_with::<u8>(n_b, seeds[1]);
        let d_r = device_with::<[u8; 3]>(n_r, seeds[2]);
        let d_u = device_with::<u32>(n_u, seeds[3]);
        // Behind real work, so all four are in flight at once.
        busy.queue(&stream);
        let t_f = ring.download(&d_f, n_f, &stream).unwrap();
        let t_b = ring.download(&d_b, n_b, &stream).unwrap();
        let t_r = ring.download(&d_r, n_r, &stream).unwrap();
        let t_u = ring.download(&d_u, n_u, &stream).unwrap();
        // Redeemed in another order each round.
        let mut order = [0, 1, 2, 3];
        order.rotate_left(round);
        for which in order {
            match which {
                0 => check(
                    &format_args!("round {round} f32"),
                    ring.wait(&t_f).unwrap(),
                    seeds[0],
                ),
                1 => check(
                    &format_args!("round {round} u8"),
                    ring.wait(&t_b).unwrap(),
                    seeds[1],
                ),
                2 => check(
                    &format_args!("round {round} rgb"),
                    ring.wait(&t_r).unwrap(),
                    seeds[2],
                ),
                _ => check(
                    &format_args!("round {round} u32"),
                    ring.wait(&t_u).unwrap(),
                    seeds[3],
                ),
            }
        }
    }
    let s = ring.stats();
    assert_eq!(s.downloads - warmed.downloads, 12);
    assert_eq!(s.uploads, 0);
    assert_eq!(s.allocations, warmed.allocations, "{s:?}");
    assert_eq!(
        s.slot_waits, 0,
        "every slot was redeemed before reuse: {s:?}"
    );
}
