//! The host copy of the 2-D transfers: rows between a caller's slice, whose rows
//! start a pitch apart, and packed pinned memory.
//!
//! Rows are packed in pinned memory (no padding) so that `upload_2d_with` and
//! `download_2d_into` hand out plain `width * height` slices and the DMA moves no
//! padding; one `cuMemcpy2DAsync` spreads them to the device's pitch. Host rows that
//! are contiguous (one row, or a pitch equal to the row) are one copy, split over the
//! copy pool as `upload` / `download` split theirs; padded host rows are copied one
//! by one on the calling thread (rows of a few KiB are below the size a split pays
//! for). Uploads from 32 KiB write pinned memory with streaming stores, as `upload`
//! does (see `copy.rs`).

use cuda_core::{Layout2d, Result};

use crate::copy::Copier;
use crate::errors::internal;
use crate::stores::streams;

/// Copies `host`'s rows out of `src` (rows `host.pitch_bytes()` apart) into the
/// first `host.packed_bytes()` of `dst`, packed, on `copier`'s threads where the rows
/// are contiguous. `src` holds `host.span_bytes()` and `dst` the packed bytes
/// (checked by the caller; an internal error otherwise, never a panic).
pub(crate) fn pack(dst: &mut [u8], src: &[u8], host: &Layout2d, copier: Copier<'_>) -> Result<()> {
    let packed = host.packed_bytes();
    if packed == 0 {
        return Ok(());
    }
    let streaming = streams(packed);
    let (Some(dst), Some(src)) = (dst.get_mut(..packed), src.get(..host.span_bytes())) else {
        return Err(internal("2-D rows larger than their memory"));
    };
    if host.is_contiguous() {
        copier.copy(dst, src, streaming);
        return Ok(());
    }
    for (r, out) in dst.chunks_exact_mut(host.row_bytes()).enumerate() {
        let row = src.get(host.row_range(r)).ok_or_else(out_of_rows)?;
        Copier::solo().copy(out, row, streaming);
    }
    Ok(())
}

/// Copies the packed rows at the start of `src` into `dst` at `host`'s places (rows
/// `host.pitch_bytes()` apart), leaving the bytes between rows alone. Sizes as
/// [`pack`], the other way round.
pub(crate) fn unpack(
    dst: &mut [u8],
    src: &[u8],
    host: &Layout2d,
    copier: Copier<'_>,
) -> Result<()> {
    let packed = host.packed_bytes();
    if packed == 0 {
        return Ok(());
    }
    let (Some(dst), Some(src)) = (dst.get_mut(..host.span_bytes()), src.get(..packed)) else {
        return Err(internal("2-D rows larger than their memory"));
    };
    if host.is_contiguous() {
        copier.copy_out(dst, src);
        return Ok(());
    }
    for (r, row) in src.chunks_exact(host.row_bytes()).enumerate() {
        let out = dst.get_mut(host.row_range(r)).ok_or_else(out_of_rows)?;
        Copier::solo().copy_out(out, row);
    }
    Ok(())
}

/// The copier [`pack`] and [`unpack`] copy `host`'s rows with when handed `copier`:
/// `copier` for contiguous rows (one copy), the calling thread alone for padded ones
/// (row by row). For the `tracing` feature's spans.
pub(crate) fn copier_for<'a>(host: &Layout2d, copier: Copier<'a>) -> Copier<'a> {
    if host.is_contiguous() {
        copier
    } else {
        Copier::solo()
    }
}

fn out_of_rows() -> cuda_core::Error {
    internal("a 2-D row past the end of its memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize, salt: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt) | 1)
            .collect()
    }

    #[test]
    fn rows_are_packed_and_unpacked_without_touching_padding() {
        for (width, height, pitch) in [(3, 4, 5), (17, 3, 64), (641, 2, 700), (5000, 9, 5003)] {
            let host = Layout2d::new::<u8>("t", "rows", width, height, pitch).unwrap();
            let src = bytes(host.span_bytes(), 7);
            let mut packed = vec![0xEE; host.packed_bytes() + 3];
            pack(&mut packed, &src, &host, Copier::solo()).unwrap();
            for r in 0..height {
                assert_eq!(
                    &packed[r * width..(r + 1) * width],
                    &src[host.row_range(r)],
                    "{width}x{height}: row {r}"
                );
            }
            assert_eq!(&packed[host.packed_bytes()..], &[0xEE; 3], "past the rows");

            let mut out = vec![0xAA; host.span_bytes() + 2];
            unpack(&mut out, &packed, &host, Copier::solo()).unwrap();
            for (i, b) in out.iter().enumerate() {
                let in_row = i < host.span_bytes() && i % pitch < width;
                let want = if in_row { src[i] } else { 0xAA };
                assert_eq!(*b, want, "{width}x{height}: byte {i}");
            }
        }
    }

    #[test]
    fn contiguous_rows_are_one_copy() {
        let host = Layout2d::new::<[u8; 3]>("t", "rows", 7, 5, 21).unwrap();
        assert!(host.is_contiguous());
        let src = bytes(host.span_bytes(), 3);
        let mut packed = vec![0; host.packed_bytes()];
        pack(&mut packed, &src, &host, Copier::solo()).unwrap();
        assert_eq!(packed, src);
        let mut out = vec![0; host.span_bytes()];
        unpack(&mut out, &packed, &host, Copier::solo()).unwrap();
        assert_eq!(out, src);
    }

    #[test]
    fn memory_too_small_is_an_error_not_a_panic() {
        let host = Layout2d::new::<u8>("t", "rows", 4, 3, 6).unwrap();
        let mut dst = vec![0; 12];
        assert!(pack(&mut dst, &[1; 15], &host, Copier::solo()).is_err());
        assert!(pack(&mut dst[..11], &[1; 16], &host, Copier::solo()).is_err());
        assert!(unpack(&mut [0; 15], &dst, &host, Copier::solo()).is_err());
        // No rows: nothing to do, whatever the memory.
        let empty = Layout2d::new::<u8>("t", "rows", 0, 3, 0).unwrap();
        assert!(pack(&mut [], &[], &empty, Copier::solo()).is_ok());
        assert!(unpack(&mut [], &[], &empty, Copier::solo()).is_ok());
    }
}
