//! The pipeline's CPU side, the user's own code: decoded frames, preprocessing
//! (`u8` HWC to normalised `f32` CHW), post-processing (the best class of each of the
//! 8400 anchors) and the checksums that check every frame. Pure; no GPU.

use cuda_core::bytemuck;

/// Frame side, pixels.
pub const SIDE: usize = 640;
/// Colour channels.
pub const CHANNELS: usize = 3;
/// Pixels per frame.
pub const PIXELS: usize = SIDE * SIDE;
/// Bytes of a decoded frame: 640×640×3 `u8`, HWC.
pub const FRAME_BYTES: usize = PIXELS * CHANNELS;
/// Elements of the preprocessed input: 3×640×640 `f32`, CHW.
pub const INPUT_LEN: usize = CHANNELS * PIXELS;
/// Bytes of the preprocessed input: 4915200.
pub const INPUT_BYTES: usize = INPUT_LEN * 4;

/// Rows of the YOLO-shaped output (4 box coordinates and 80 class scores).
pub const CLASSES: usize = 84;
/// Columns of the YOLO-shaped output: one per anchor.
pub const ANCHORS: usize = 8400;
/// Elements of the YOLO-shaped output, 84×8400 `f32` row-major.
pub const SCORES_LEN: usize = CLASSES * ANCHORS;
/// Bytes of the YOLO-shaped output: 2822400.
pub const SCORES_BYTES: usize = SCORES_LEN * 4;

/// The 4 KiB `u8` output: elements.
pub const SMALL_U8_LEN: usize = 4096;
/// The 16 KiB `f32` output: elements.
pub const SMALL_16K_LEN: usize = 4096;
/// The 64 KiB `f32` output: elements.
pub const SMALL_64K_LEN: usize = 16384;

/// Where the GPU stand-in takes each output from, in elements of the input (the
/// `u8` output: the bytes of these input elements).
pub const SCORES_FROM: usize = 0;
/// The `u8` output holds the bytes of input elements from here (1024 of them).
pub const SMALL_U8_FROM: usize = SCORES_LEN;
/// The 16 KiB output holds input elements from here: the start of the blue plane.
pub const SMALL_16K_FROM: usize = 2 * PIXELS;
/// The 64 KiB output holds the last input elements.
pub const SMALL_64K_FROM: usize = INPUT_LEN - SMALL_64K_LEN;

/// Distinct frames the loops cycle through.
pub const SOURCE_FRAMES: usize = 4;

/// ImageNet channel means (RGB), as torchvision normalises.
pub const MEAN: [f32; CHANNELS] = [0.485, 0.456, 0.406];
/// ImageNet channel standard deviations (RGB).
pub const STD: [f32; CHANNELS] = [0.229, 0.224, 0.225];

/// Byte `i` of source frame `frame`: a hash of both, so it differs per pixel,
/// channel and frame, and no frame is a shifted copy of another.
pub fn frame_byte(frame: usize, i: usize) -> u8 {
    let x = (i as u64)
        .wrapping_add((frame as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x >> 56) as u8
}

/// The [`SOURCE_FRAMES`] decoded frames, in ordinary memory as a decoder hands
/// them over.
pub fn source_frames() -> Vec<Vec<u8>> {
    (0..SOURCE_FRAMES)
        .map(|f| (0..FRAME_BYTES).map(|i| frame_byte(f, i)).collect())
        .collect()
}

/// Preprocesses an HWC `u8` frame into CHW `f32`: each channel value `x` becomes
/// `(x / 255 - MEAN[c]) / STD[c]`. Single-threaded, as a user writes it.
///
/// `out.len()` must be `frame.len()` (three channels per pixel).
pub fn preprocess(frame: &[u8], out: &mut [f32]) {
    assert_eq!(
        out.len(),
        frame.len(),
        "preprocess: {} output elements for {} frame bytes",
        out.len(),
        frame.len()
    );
    let pixels = frame.len() / CHANNELS;
    let (r, rest) = out.split_at_mut(pixels);
    let (g, b) = rest.split_at_mut(pixels);
    for (((px, r), g), b) in frame.chunks_exact(CHANNELS).zip(r).zip(g).zip(b) {
        *r = (f32::from(px[0]) / 255.0 - MEAN[0]) / STD[0];
        *g = (f32::from(px[1]) / 255.0 - MEAN[1]) / STD[1];
        *b = (f32::from(px[2]) / 255.0 - MEAN[2]) / STD[2];
    }
}

/// The best row of one column: its index (the class) and its value (the score).
pub type Best = (u8, f32);

/// For each column `j` of the row-major matrix `out` (`best.len()` columns), the
/// row with the largest value and that value; the first such row on ties.
///
/// `out.len()` must be a non-zero multiple of `best.len()`, with at most 256 rows.
pub fn argmax_columns(out: &[f32], best: &mut [Best]) {
    let cols = best.len();
    assert!(
        cols > 0 && !out.is_empty() && out.len().is_multiple_of(cols) && out.len() / cols <= 256,
        "argmax_columns: {} elements do not make whole rows of {cols} (1 to 256 rows)",
        out.len()
    );
    let mut rows = out.chunks_exact(cols);
    let first = rows.next().expect("at least one row");
    for (b, &v) in best.iter_mut().zip(first) {
        *b = (0, v);
    }
    for (r, row) in rows.enumerate() {
        let class = (r + 1) as u8;
        for (b, &v) in best.iter_mut().zip(row) {
            if v > b.1 {
                *b = (class, v);
            }
        }
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn mix(h: u64, word: u64) -> u64 {
    (h ^ word).wrapping_mul(FNV_PRIME)
}

/// A checksum of post-processed results (class and score bits of each column).
pub fn best_checksum(best: &[Best]) -> u64 {
    best.iter().fold(FNV_OFFSET, |h, &(class, score)| {
        mix(h, u64::from(class) << 32 | u64::from(score.to_bits()))
    })
}

/// The four outputs of one frame, wherever they landed.
#[derive(Clone, Copy, Debug)]
pub struct Outputs<'a> {
    /// 84×8400 `f32`, row-major.
    pub scores: &'a [f32],
    /// 4 KiB of `u8`.
    pub small_u8: &'a [u8],
    /// 16 KiB of `f32`.
    pub small_16k: &'a [f32],
    /// 64 KiB of `f32`.
    pub small_64k: &'a [f32],
}

impl<'a> Outputs<'a> {
    /// What the GPU stand-in derives from the preprocessed `input`: the outputs are
    /// these parts of it, bit for bit.
    pub fn expected_from(input: &'a [f32]) -> Outputs<'a> {
        assert_eq!(input.len(), INPUT_LEN, "a preprocessed input");
        Outputs {
            scores: &input[SCORES_FROM..SCORES_FROM + SCORES_LEN],
            small_u8: bytemuck::cast_slice(&input[SMALL_U8_FROM..SMALL_U8_FROM + SMALL_U8_LEN / 4]),
            small_16k: &input[SMALL_16K_FROM..SMALL_16K_FROM + SMALL_16K_LEN],
            small_64k: &input[SMALL_64K_FROM..SMALL_64K_FROM + SMALL_64K_LEN],
        }
    }

    /// A checksum of the three small outputs.
    pub fn small_checksum(&self) -> u64 {
        let h = self.small_u8.chunks(8).fold(FNV_OFFSET, |h, c| {
            let mut word = [0u8; 8];
            word[..c.len()].copy_from_slice(c);
            mix(h, u64::from_le_bytes(word))
        });
        self.small_16k
            .iter()
            .chain(self.small_64k)
            .fold(h, |h, v| mix(h, u64::from(v.to_bits())))
    }
}

/// Post-processes one frame's outputs: the best class of each of the 8400 anchors
/// into `best` (which must hold [`ANCHORS`]), and a checksum of those results and of
/// the small outputs, to compare with the frame's expected one.
pub fn postprocess(outputs: &Outputs<'_>, best: &mut [Best]) -> u64 {
    argmax_columns(outputs.scores, best);
    mix(best_checksum(best), outputs.small_checksum())
}

/// Each frame preprocessed on the CPU alone: the reference the outputs are checked
/// against.
pub fn preprocessed(frames: &[Vec<u8>]) -> Vec<Vec<f32>> {
    frames
        .iter()
        .map(|f| {
            let mut input = vec![0f32; f.len()];
            preprocess(f, &mut input);
            input
        })
        .collect()
}

/// The checksum a correct frame gives, per preprocessed reference `inputs`. `Err`
/// when two frames give the same checksum, which would let a stale result pass.
pub fn expected_checksums(inputs: &[Vec<f32>]) -> Result<Vec<u64>, String> {
    let mut best = vec![(0u8, 0f32); ANCHORS];
    let sums: Vec<u64> = inputs
        .iter()
        .map(|input| postprocess(&Outputs::expected_from(input), &mut best))
        .collect();
    for (i, a) in sums.iter().enumerate() {
        if let Some(j) = sums[..i].iter().position(|b| b == a) {
            return Err(format!(
                "source frames {j} and {i} give the same checksum {a:#x}: a stale result \
                 could pass the check"
            ));
        }
    }
    Ok(sums)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preprocess_normalises_and_moves_channels_to_planes() {
        // A 2×1 frame: pixel 0 = (0, 128, 255), pixel 1 = (255, 0, 51).
        let frame = [0u8, 128, 255, 255, 0, 51];
        let mut out = [0f32; 6];
        preprocess(&frame, &mut out);
        let norm = |x: f32, c: usize| (x / 255.0 - MEAN[c]) / STD[c];
        let want = [
            norm(0.0, 0),
            norm(255.0, 0),
            norm(128.0, 1),
            norm(0.0, 1),
            norm(255.0, 2),
            norm(51.0, 2),
        ];
        assert_eq!(out, want);
        assert!((out[0] - (-0.485 / 0.229)).abs() < 1e-6);
        assert!((out[1] - (0.515 / 0.229)).abs() < 1e-5);
        assert!((out[5] - ((0.2 - 0.406) / 0.225)).abs() < 1e-5);
    }

    #[test]
    #[should_panic(expected = "preprocess: 5 output elements for 6 frame bytes")]
    fn preprocess_refuses_a_wrong_output_length() {
        preprocess(&[0; 6], &mut [0.0; 5]);
    }

    #[test]
    fn argmax_takes_the_best_row_of_each_column_first_on_ties() {
        // 3 rows × 4 columns.
        #[rustfmt::skip]
        let m = [
            1.0, 5.0, -1.0, 2.0,
            3.0, 5.0, -2.0, 2.0,
            2.0, 4.0, -0.5, 7.0,
        ];
        let mut best = [(9u8, 9f32); 4];
        argmax_columns(&m, &mut best);
        assert_eq!(best, [(1, 3.0), (0, 5.0), (2, -0.5), (2, 7.0)]);
    }

    #[test]
    fn frames_differ_per_pixel_and_per_frame() {
        let a: Vec<u8> = (0..4096).map(|i| frame_byte(0, i)).collect();
        let b: Vec<u8> = (0..4096).map(|i| frame_byte(1, i)).collect();
        assert_ne!(a, b);
        assert!(a.windows(2).filter(|w| w[0] == w[1]).count() < 64);
        let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
        assert!(same < 64, "{same} equal bytes at the same position");
    }

    #[test]
    fn the_outputs_are_parts_of_the_input() {
        let input: Vec<f32> = (0..INPUT_LEN).map(|i| i as f32).collect();
        let o = Outputs::expected_from(&input);
        assert_eq!(o.scores.len(), SCORES_LEN);
        assert_eq!(o.scores[SCORES_LEN - 1], (SCORES_LEN - 1) as f32);
        assert_eq!(o.small_u8.len(), SMALL_U8_LEN);
        assert_eq!(&o.small_u8[..4], &(SCORES_LEN as f32).to_ne_bytes());
        assert_eq!(std::mem::size_of_val(o.small_16k), 16 << 10);
        assert_eq!(o.small_16k[0], (2 * PIXELS) as f32);
        assert_eq!(std::mem::size_of_val(o.small_64k), 64 << 10);
        assert_eq!(o.small_64k[SMALL_64K_LEN - 1], (INPUT_LEN - 1) as f32);
        assert_eq!((INPUT_BYTES, SCORES_BYTES), (4_915_200, 2_822_400));
    }

    #[test]
    fn the_source_frames_give_distinct_checksums() {
        let inputs = preprocessed(&source_frames());
        let sums = expected_checksums(&inputs).unwrap();
        assert_eq!(sums.len(), SOURCE_FRAMES);
        let twice = [inputs[0].clone(), inputs[0].clone()];
        let e = expected_checksums(&twice).unwrap_err();
        assert!(
            e.contains("source frames 0 and 1 give the same checksum"),
            "{e}"
        );
    }

    #[test]
    fn a_checksum_sees_a_changed_class_score_or_small_output() {
        let input: Vec<f32> = (0..INPUT_LEN).map(|i| (i % 977) as f32 * 0.5).collect();
        let mut best = vec![(0u8, 0f32); ANCHORS];
        let base = postprocess(&Outputs::expected_from(&input), &mut best);
        let mut changed = input.clone();
        changed[40 * ANCHORS + 17] = 1e9; // a new best in column 17
        assert_ne!(
            postprocess(&Outputs::expected_from(&changed), &mut best),
            base
        );
        assert_eq!(best[17], (40, 1e9));
        let mut changed = input.clone();
        changed[SMALL_64K_FROM + 3] += 1.0;
        assert_ne!(
            postprocess(&Outputs::expected_from(&changed), &mut best),
            base
        );
        let mut changed = input;
        changed[SMALL_U8_FROM] = -changed[SMALL_U8_FROM] - 1.0;
        assert_ne!(
            postprocess(&Outputs::expected_from(&changed), &mut best),
            base
        );
    }
}
