//! Soak test: 100,000 transfers of random sizes and directions through every path,
//! each verified, with a report of what grew. Needs a GPU and takes tens of seconds,
//! so it is ignored by default and run by `cargo xtask test-gpu --soak`.

use cuda_staging::{Context, DeviceBuffer, HostRegistration, PinnedBuffer, StagingBuffer, Stream};

const ROUND_TRIPS: usize = 50_000; // two transfers each
const WARM_UP: usize = 1_000;
const MAX_BYTES: usize = 2 << 20;

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Log-uniform in `1..=max`, so small and large transfers are both common.
    fn size(&mut self, max: usize) -> usize {
        let bits = (self.next() % (max.ilog2() as u64 + 1)) as u32;
        let lo = 1usize << bits;
        (lo + (self.next() as usize % lo)).min(max)
    }
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn checksum(bytes: &[u8]) -> u64 {
    // FNV-1a over 8-byte words plus the tail: cheap and order-sensitive.
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        h = (h ^ u64::from_le_bytes(w.try_into().unwrap())).wrapping_mul(0x100_0000_01b3);
    }
    for &b in words.remainder() {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

#[test]
#[ignore = "soak, needs a CUDA GPU: run with cargo xtask test-gpu --soak"]
fn soak_random_transfers_through_every_path() {
    let ctx = Context::new(0).expect("soak test needs CUDA device 0");
    let stream = Stream::new(&ctx).expect("stream");
    let mut staging = StagingBuffer::new();
    let mut dev = DeviceBuffer::<u8>::alloc(MAX_BYTES).expect("device buffer");
    let mut host_src = vec![0u8; MAX_BYTES];
    let mut host_dst = vec![0u8; MAX_BYTES];
    let mut pinned = PinnedBuffer::<u8>::alloc(MAX_BYTES).expect("pinned");
    let mut reg_mem = vec![0u8; MAX_BYTES];
    let mut reg = HostRegistration::new(&ctx, &mut reg_mem).expect("register");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);

    let rss_start = rss_bytes();
    let (mut transfers, mut bytes_moved) = (0u64, 0u64);
    let mut after_warm_up = None;
    let mut digest = 0u64;

    for i in 0..ROUND_TRIPS {
        // The first round trip uses the largest size so warm-up reaches full capacity.
        let n = if i == 0 {
            MAX_BYTES
        } else {
            rng.size(MAX_BYTES)
        };
        let seed = rng.next();
        for (j, b) in host_src[..n].iter_mut().enumerate() {
            *b = (seed as usize).wrapping_add(j.wrapping_mul(0x9E37)) as u8 ^ (j >> 8) as u8;
        }
        let sent = checksum(&host_src[..n]);
        // Upload through one of four paths.
        match rng.next() % 4 {
            0 => staging.upload(&mut dev, &host_src[..n], &stream),
            1 => staging.upload_with(&mut dev, n, &stream, |d: &mut [u8]| {
                d.copy_from_slice(&host_src[..n])
            }),
            2 => {
                pinned[..n].copy_from_slice(&host_src[..n]);
                staging.upload(&mut dev, &pinned[..n], &stream)
            }
            _ => {
                reg[..n].copy_from_slice(&host_src[..n]);
                staging.upload(&mut dev, &reg[..n], &stream)
            }
        }
        .unwrap_or_else(|e| panic!("upload {i} of {n} bytes: {e}"));
        // Download through one of four paths.
        let got = match rng.next() % 4 {
            0 => {
                staging
                    .download(&mut host_dst[..n], &dev, &stream)
                    .expect("download");
                checksum(&host_dst[..n])
            }
            1 => checksum(
                staging
                    .download_into(&dev, n, &stream)
                    .expect("download_into"),
            ),
            2 => {
                staging
                    .download(&mut pinned[..n], &dev, &stream)
                    .expect("download pinned");
                checksum(&pinned[..n])
            }
            _ => {
                staging
                    .download(&mut reg[..n], &dev, &stream)
                    .expect("download registered");
                checksum(&reg[..n])
            }
        };
        assert_eq!(got, sent, "round trip {i} of {n} bytes corrupted");
        digest ^= got;
        transfers += 2;
        bytes_moved += 2 * n as u64;
        if i + 1 == WARM_UP {
            after_warm_up = Some((staging.stats(), rss_bytes()));
        }
    }

    let stats = staging.stats();
    let rss_end = rss_bytes();
    let (warm_stats, warm_rss) = after_warm_up.expect("warm-up finished");
    println!(
        "SOAK: {transfers} transfers, {:.2} GiB moved, {} pinned allocations ({} after warm-up), \
         peak pinned capacity {} KiB, RSS start {} MiB, after warm-up {} MiB, end {} MiB, \
         paths: staged {} pinned-source {} direct {}, digest {digest:016x}",
        bytes_moved as f64 / (1u64 << 30) as f64,
        stats.allocations,
        stats.allocations - warm_stats.allocations,
        stats.peak_capacity_bytes / 1024,
        rss_start >> 20,
        warm_rss >> 20,
        rss_end >> 20,
        stats.staged_transfers,
        stats.pinned_source_transfers,
        stats.direct_transfers,
    );
    assert_eq!(stats.transfers(), transfers);
    assert_eq!(stats.bytes_uploaded + stats.bytes_downloaded, bytes_moved);
    assert_eq!(
        stats.allocations, warm_stats.allocations,
        "pinned memory grew after warm-up"
    );
    assert_eq!(stats.peak_capacity_bytes, warm_stats.peak_capacity_bytes);
    // RSS may wobble by allocator noise; growth past 16 MiB after warm-up is a leak.
    assert!(
        rss_end <= warm_rss + (16 << 20),
        "RSS grew from {warm_rss} to {rss_end} bytes after warm-up"
    );
}
