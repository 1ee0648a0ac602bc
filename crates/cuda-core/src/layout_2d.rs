//! [`Layout2d`]: the shape of a 2-D region of memory — rows of bytes, a pitch apart —
//! and the checks every 2-D copy makes on it before any driver call.

use crate::error::{Error, Result};

/// The shape of a 2-D region: [`height`](Layout2d::height) rows of
/// [`row_bytes`](Layout2d::row_bytes) bytes, each row starting
/// [`pitch_bytes`](Layout2d::pitch_bytes) after the one before (a decoder's line
/// size, `cuMemAllocPitch`'s pitch). The bytes between the end of a row and the
/// start of the next are padding: no 2-D copy reads or writes them.
///
/// A value of this type always has `pitch_bytes >= row_bytes` and a
/// [`span_bytes`](Layout2d::span_bytes) that fits a `usize`.
///
/// ```
/// use cuda_core::Layout2d;
///
/// // A 1920x1080 RGB frame whose rows a decoder aligned to 64 bytes.
/// let frame = Layout2d::new::<[u8; 3]>("example", "the frame", 1920, 1080, 5760)?;
/// assert_eq!(frame.row_bytes(), 5760);
/// assert_eq!(frame.packed_bytes(), 1920 * 1080 * 3);
/// // Width 641 f32 with rows padded to 2688 bytes: the last row needs no padding.
/// let rows = Layout2d::new::<f32>("example", "the rows", 641, 3, 2688)?;
/// assert_eq!(rows.span_bytes(), 2 * 2688 + 641 * 4);
/// // A pitch shorter than a row is an error that names the numbers.
/// let e = Layout2d::new::<f32>("example", "the rows", 641, 3, 2560).unwrap_err();
/// assert!(e.to_string().contains("a pitch of 2560 bytes is shorter than a row of 2564 bytes"));
/// # Ok::<(), cuda_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout2d {
    row_bytes: usize,
    height: usize,
    pitch_bytes: usize,
    span_bytes: usize,
}

impl Layout2d {
    /// `height` rows of `width` elements of `T`, `pitch_bytes` apart.
    ///
    /// Errors, naming `op` and `what` (which region): [`Error::SizeOverflow`] when
    /// `width * size_of::<T>()` overflows, [`Error::PitchTooSmall`] when
    /// `pitch_bytes` is shorter than a row, [`Error::InvalidArgument`] when the span
    /// (`(height - 1) * pitch_bytes + row_bytes`) overflows. A region with no row or
    /// rows of no byte (`height == 0`, `width == 0`, or a zero-sized `T`) is valid
    /// with any pitch at least its row, and spans nothing.
    pub fn new<T>(
        op: &'static str,
        what: &'static str,
        width: usize,
        height: usize,
        pitch_bytes: usize,
    ) -> Result<Layout2d> {
        let elem_bytes = std::mem::size_of::<T>();
        let row_bytes = width.checked_mul(elem_bytes).ok_or(Error::SizeOverflow {
            op,
            n: width,
            elem_bytes,
        })?;
        if pitch_bytes < row_bytes {
            return Err(Error::PitchTooSmall {
                op,
                what,
                width,
                elem_bytes,
                row_bytes,
                pitch_bytes,
            });
        }
        let span_bytes = if height == 0 || row_bytes == 0 {
            0
        } else {
            (height - 1)
                .checked_mul(pitch_bytes)
                .and_then(|b| b.checked_add(row_bytes))
                .ok_or_else(|| Error::InvalidArgument {
                    op,
                    reason: format!(
                        "{what}: {height} rows of {row_bytes} bytes at a pitch of \
                         {pitch_bytes} bytes overflow a byte count"
                    ),
                })?
        };
        Ok(Layout2d {
            row_bytes,
            height,
            pitch_bytes,
            span_bytes,
        })
    }

    /// `height` rows of `width` elements of `T` with no padding between them (the
    /// pitch is the row). Errors as [`Layout2d::new`].
    pub fn packed<T>(op: &'static str, width: usize, height: usize) -> Result<Layout2d> {
        let row = width
            .checked_mul(std::mem::size_of::<T>())
            .ok_or(Error::SizeOverflow {
                op,
                n: width,
                elem_bytes: std::mem::size_of::<T>(),
            })?;
        Layout2d::new::<T>(op, "the packed rows", width, height, row)
    }

    /// Bytes per row (what a copy moves per row).
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    /// Rows.
    pub fn height(&self) -> usize {
        self.height
    }

    /// Bytes from the start of one row to the start of the next.
    pub fn pitch_bytes(&self) -> usize {
        self.pitch_bytes
    }

    /// Bytes from the first row's start to the last row's end:
    /// `(height - 1) * pitch_bytes + row_bytes`, 0 without rows or bytes per row. The
    /// memory holding the region needs at least this many bytes (the last row needs
    /// no padding after it).
    pub fn span_bytes(&self) -> usize {
        self.span_bytes
    }

    /// The bytes the rows hold, without padding: `row_bytes * height` (never more
    /// than [`span_bytes`](Layout2d::span_bytes), so it cannot overflow).
    pub fn packed_bytes(&self) -> usize {
        self.row_bytes * self.height
    }

    /// Whether the rows hold no byte at all (a copy of it is a no-op).
    pub fn is_empty(&self) -> bool {
        self.span_bytes == 0
    }

    /// Whether there is no padding between rows (one row, or a pitch equal to the
    /// row): the rows are one contiguous run of [`packed_bytes`](Layout2d::packed_bytes).
    pub fn is_contiguous(&self) -> bool {
        self.height <= 1 || self.pitch_bytes == self.row_bytes
    }

    /// [`Error::RegionOutOfBounds`] (naming `op` and `what`) unless the region fits in
    /// `len_bytes` bytes of memory.
    pub fn check_fits(&self, op: &'static str, what: &'static str, len_bytes: usize) -> Result<()> {
        if self.span_bytes <= len_bytes {
            return Ok(());
        }
        Err(Error::RegionOutOfBounds {
            op,
            what,
            height: self.height,
            row_bytes: self.row_bytes,
            pitch_bytes: self.pitch_bytes,
            span_bytes: self.span_bytes,
            len_bytes,
        })
    }

    /// The byte range of row `r` (`r < height`) from the region's start.
    pub fn row_range(&self, r: usize) -> std::ops::Range<usize> {
        let start = r * self.pitch_bytes;
        start..start + self.row_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_leave_out_the_last_row_s_padding() {
        let l = Layout2d::new::<f32>("t", "rows", 641, 3, 2688).unwrap();
        assert_eq!(l.row_bytes(), 2564);
        assert_eq!(l.height(), 3);
        assert_eq!(l.pitch_bytes(), 2688);
        assert_eq!(l.span_bytes(), 2 * 2688 + 2564);
        assert_eq!(l.packed_bytes(), 3 * 2564);
        assert!(!l.is_contiguous());
        assert_eq!(l.row_range(2), 5376..7940);
        let one = Layout2d::new::<u8>("t", "rows", 17, 1, 64).unwrap();
        assert_eq!(one.span_bytes(), 17);
        assert!(one.is_contiguous());
        let packed = Layout2d::packed::<[u8; 3]>("t", 5, 4).unwrap();
        assert_eq!((packed.row_bytes(), packed.pitch_bytes()), (15, 15));
        assert_eq!(packed.span_bytes(), 60);
        assert!(packed.is_contiguous());
    }

    #[test]
    fn a_pitch_shorter_than_a_row_names_the_numbers() {
        let e = Layout2d::new::<[u8; 3]>("upload_2d", "the host rows", 17, 2, 50).unwrap_err();
        assert_eq!(
            e,
            Error::PitchTooSmall {
                op: "upload_2d",
                what: "the host rows",
                width: 17,
                elem_bytes: 3,
                row_bytes: 51,
                pitch_bytes: 50
            }
        );
        assert_eq!(
            e.to_string(),
            "upload_2d: the host rows: a pitch of 50 bytes is shorter than a row of 51 \
             bytes (17 elements of 3 bytes)"
        );
        // Even for a single row: the driver wants a pitch of at least the width.
        assert!(Layout2d::new::<u8>("t", "rows", 2, 1, 1).is_err());
    }

    #[test]
    fn regions_past_the_memory_are_refused_with_their_numbers() {
        let l = Layout2d::new::<u8>("download_2d", "the host rows", 3, 4, 5).unwrap();
        assert_eq!(l.span_bytes(), 18);
        assert!(l.check_fits("download_2d", "the host rows", 18).is_ok());
        let e = l
            .check_fits("download_2d", "the host rows", 17)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "download_2d: the host rows: 4 rows of 3 bytes at a pitch of 5 bytes span 18 \
             bytes, but the memory holds 17"
        );
        assert!(matches!(
            e,
            Error::RegionOutOfBounds {
                span_bytes: 18,
                len_bytes: 17,
                ..
            }
        ));
    }

    #[test]
    fn empty_regions_span_nothing_whatever_their_pitch() {
        for l in [
            Layout2d::new::<f32>("t", "r", 0, 1000, 0).unwrap(),
            Layout2d::new::<f32>("t", "r", 0, usize::MAX, usize::MAX).unwrap(),
            Layout2d::new::<f32>("t", "r", 10, 0, 40).unwrap(),
            Layout2d::new::<()>("t", "r", usize::MAX, usize::MAX, 0).unwrap(),
        ] {
            assert!(l.is_empty(), "{l:?}");
            assert_eq!(l.span_bytes(), 0);
            assert_eq!(l.packed_bytes(), 0);
            assert!(l.check_fits("t", "r", 0).is_ok());
        }
        // Zero rows still need a pitch of at least the row.
        assert!(Layout2d::new::<f32>("t", "r", 10, 0, 39).is_err());
    }

    #[test]
    fn overflowing_products_are_errors_not_panics() {
        let e = Layout2d::new::<u64>("t", "r", usize::MAX / 4, 1, usize::MAX).unwrap_err();
        assert_eq!(
            e,
            Error::SizeOverflow {
                op: "t",
                n: usize::MAX / 4,
                elem_bytes: 8
            }
        );
        let e = Layout2d::new::<u8>("t", "the rows", 16, 1 << 40, 1 << 40).unwrap_err();
        assert!(
            e.to_string().contains(
                "the rows: 1099511627776 rows of 16 bytes at a pitch of 1099511627776 bytes \
                 overflow a byte count"
            ),
            "{e}"
        );
        // (height - 1) * pitch fits, + row does not.
        let e = Layout2d::new::<u8>("t", "r", 2, 2, usize::MAX - 1).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
        assert!(Layout2d::packed::<u32>("t", usize::MAX, 1).is_err());
    }

    #[test]
    fn span_is_the_end_of_the_last_row() {
        for width in [0, 1, 3, 17, 641, 1920] {
            for height in [0, 1, 2, 3, 1080] {
                for pad in [0, 1, 3, 64, 511] {
                    let row = width * 4;
                    let l = Layout2d::new::<f32>("t", "r", width, height, row + pad).unwrap();
                    if height > 0 && width > 0 {
                        assert_eq!(l.span_bytes(), l.row_range(height - 1).end, "{l:?}");
                    } else {
                        assert_eq!(l.span_bytes(), 0, "{l:?}");
                    }
                    assert!(l.packed_bytes() <= l.span_bytes(), "{l:?}");
                    assert_eq!(l.is_contiguous(), height <= 1 || pad == 0, "{l:?}");
                }
            }
        }
    }
}
