//! Packing: the data of `count` elements of a [`Datatype`] copied into one
//! contiguous run of bytes in type map order, and back.
//!
//! The safe forms work on byte slices whose first byte is the origin of
//! element 0 and check that every byte the type map reaches is inside;
//! the `unsafe` raw forms take a base pointer (for the C library, whose
//! buffers may reach below their pointer or be absolute addresses).
//! Unpacking a shorter run of bytes fills elements as far as its bytes go
//! (what a short message delivers).
//!
//! ```
//! use hmpi_core::datatype::{Buffer, BufferMut, Equivalence, UserDatatype};
//!
//! let column = UserDatatype::vector(3, 1, 3, &i32::equivalent_datatype()).unwrap();
//! let m = [1i32, 2, 3, 4, 5, 6, 7, 8, 9];
//! let mut packed = [0u8; 12];
//! column.pack(m.as_bytes(), 1, &mut packed).unwrap();
//! let mut back = [0i32; 9];
//! column.unpack(&packed, back.as_bytes_mut(), 1).unwrap();
//! assert_eq!(back, [1, 0, 0, 4, 0, 0, 7, 0, 0]);
//! ```

use super::Datatype;
use crate::{Error, Result};

fn buffer_error(reason: String) -> Error {
    Error::Buffer { reason }
}

impl Datatype {
    /// Bytes of data of `count` elements (what [`Datatype::pack`] writes),
    /// or [`Error::TooLarge`] if that overflows.
    pub fn packed_size(&self, count: usize) -> Result<usize> {
        count
            .checked_mul(self.size())
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(|| Error::TooLarge {
                count: count as u64,
                element_size: self.size(),
            })
    }

    /// The bytes `count` elements reach, relative to the origin of the
    /// first: `[lo, hi)`, or `None` if they hold no data.
    pub fn reach(&self, count: usize) -> Result<Option<(isize, isize)>> {
        if count == 0 || self.block_count() == 0 {
            return Ok(None);
        }
        let overflow = || Error::Arg {
            reason: format!("{count} elements of the datatype reach beyond the address space"),
        };
        let span = isize::try_from(count - 1)
            .ok()
            .and_then(|n| n.checked_mul(self.extent()))
            .ok_or_else(overflow)?;
        let lo = self
            .true_lower_bound()
            .checked_add(span.min(0))
            .ok_or_else(overflow)?;
        let hi = self
            .true_upper_bound()
            .checked_add(span.max(0))
            .ok_or_else(overflow)?;
        Ok(Some((lo, hi)))
    }

    /// Checks that a buffer of `len` bytes (element 0 at its start) holds
    /// what `count` elements reach.
    pub fn check_reach(&self, len: usize, count: usize) -> Result<()> {
        if let Some((lo, hi)) = self.reach(count)? {
            if lo < 0 || hi as usize > len {
                return Err(buffer_error(format!(
                    "{count} elements reach bytes {lo}..{hi} of a buffer of {len}"
                )));
            }
        }
        Ok(())
    }

    /// Packs `count` elements of `buf` (element 0 at `buf[0]`) into the
    /// start of `out`; returns the bytes written
    /// ([`Datatype::packed_size`]). [`Error::Buffer`] if `buf` does not
    /// hold the elements or `out` is too short.
    pub fn pack(&self, buf: &[u8], count: usize, out: &mut [u8]) -> Result<usize> {
        self.check_reach(buf.len(), count)?;
        // SAFETY: every byte the type map reaches is inside `buf` (checked
        // above).
        unsafe { self.pack_raw(buf.as_ptr(), count, out) }
    }

    /// Unpacks `data` (at most [`Datatype::packed_size`] of `count` bytes;
    /// a shorter run fills elements as far as it goes) into `count`
    /// elements of `buf` (element 0 at `buf[0]`); returns the bytes used.
    pub fn unpack(&self, data: &[u8], buf: &mut [u8], count: usize) -> Result<usize> {
        self.check_reach(buf.len(), count)?;
        // SAFETY: every byte the type map reaches is inside `buf` (checked
        // above), borrowed exclusively.
        unsafe { self.unpack_raw(data, buf.as_mut_ptr(), count) }
    }

    /// [`Datatype::pack`] from a raw base pointer.
    ///
    /// # Safety
    /// The type map of every one of the `count` elements is readable at
    /// `base` (element `i` at `base + i × extent`).
    pub unsafe fn pack_raw(&self, base: *const u8, count: usize, out: &mut [u8]) -> Result<usize> {
        let bytes = self.packed_size(count)?;
        if out.len() < bytes {
            return Err(buffer_error(format!(
                "{bytes} packed bytes do not fit in {}",
                out.len()
            )));
        }
        if bytes == 0 {
            // Nothing to read: `base` may be null (MPI allows it for no
            // data), which no copy may be given, even of zero bytes.
            return Ok(0);
        }
        if let Some(off) = self.dense_offset() {
            // One run of bytes for all the elements: one copy.
            // SAFETY: the caller's guarantee: the `bytes` bytes of the
            // elements are readable from `base + off`; `out` has room.
            unsafe {
                std::ptr::copy_nonoverlapping(base.wrapping_offset(off), out.as_mut_ptr(), bytes)
            };
            return Ok(bytes);
        }
        let ext = self.extent();
        let mut at = 0;
        for i in 0..count {
            let elem = base.wrapping_offset((i as isize).wrapping_mul(ext));
            for r in self.runs() {
                let mut src = elem.wrapping_offset(r.off);
                for _ in 0..r.count {
                    // SAFETY: the caller's guarantee for the source; `out`
                    // has room for every block of every element (checked
                    // above).
                    unsafe { std::ptr::copy_nonoverlapping(src, out.as_mut_ptr().add(at), r.len) };
                    at += r.len;
                    src = src.wrapping_offset(r.stride);
                }
            }
        }
        Ok(bytes)
    }

    /// [`Datatype::unpack`] to a raw base pointer.
    ///
    /// # Safety
    /// The type map of every one of the `count` elements is writable at
    /// `base` (element `i` at `base + i × extent`) and does not overlap
    /// `data`.
    pub unsafe fn unpack_raw(&self, data: &[u8], base: *mut u8, count: usize) -> Result<usize> {
        let bytes = self.packed_size(count)?;
        if data.len() > bytes {
            return Err(buffer_error(format!(
                "{} bytes are more than {count} elements hold ({bytes})",
                data.len()
            )));
        }
        if data.is_empty() {
            return Ok(0);
        }
        if let Some(off) = self.dense_offset() {
            // One run of bytes: one copy of what arrived.
            // SAFETY: the caller's guarantee: the elements' bytes are
            // writable from `base + off`, and `data` fits in them.
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), base.wrapping_offset(off), data.len())
            };
            return Ok(data.len());
        }
        let ext = self.extent();
        let mut at = 0;
        'all: for i in 0..count {
            let elem = base.wrapping_offset((i as isize).wrapping_mul(ext));
            for r in self.runs() {
                let mut dst = elem.wrapping_offset(r.off);
                for _ in 0..r.count {
                    let n = r.len.min(data.len() - at);
                    // SAFETY: the caller's guarantee for the destination;
                    // `n` bytes remain in `data`.
                    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().add(at), dst, n) };
                    at += n;
                    if at == data.len() {
                        break 'all;
                    }
                    dst = dst.wrapping_offset(r.stride);
                }
            }
        }
        Ok(at)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{BasicType, Buffer, BufferMut, UserDatatype};
    use super::*;

    #[test]
    fn vector_packing_and_short_unpacking() {
        let int = Datatype::basic(BasicType::I32);
        let v = UserDatatype::vector(3, 2, 5, &int).unwrap();
        let src: Vec<i32> = (0..15).collect();
        let mut packed = vec![0u8; 24];
        assert_eq!(v.pack(src.as_bytes(), 1, &mut packed).unwrap(), 24);
        let ints: Vec<i32> = packed
            .chunks(4)
            .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(ints, vec![0, 1, 5, 6, 10, 11]);
        let mut dst = vec![-1i32; 15];
        // Unpack only 10 bytes: two ints and half of the third.
        assert_eq!(v.unpack(&packed[..10], dst.as_bytes_mut(), 1).unwrap(), 10);
        assert_eq!(&dst[..2], &[0, 1]);
        assert_eq!(dst[5].to_ne_bytes()[..2], 5i32.to_ne_bytes()[..2]);
        assert_eq!(dst[6], -1);
    }

    #[test]
    fn bounds_are_checked() {
        let int = Datatype::basic(BasicType::I32);
        let v = UserDatatype::vector(3, 2, 5, &int).unwrap();
        let src = [0i32; 11]; // the map reaches 12 ints
        let mut out = [0u8; 24];
        assert!(matches!(
            v.pack(src.as_bytes(), 1, &mut out),
            Err(Error::Buffer { .. })
        ));
        let src = [0i32; 12];
        assert!(matches!(
            v.pack(src.as_bytes(), 1, &mut out[..20]),
            Err(Error::Buffer { .. })
        ));
        let mut dst = [0i32; 12];
        assert!(matches!(
            v.unpack(&[0u8; 28], dst.as_bytes_mut(), 1),
            Err(Error::Buffer { .. })
        ));
        // A type reaching below its origin cannot be used on a slice.
        let h = UserDatatype::heterogeneous_vector(2, 1, -8, &int).unwrap();
        assert!(matches!(
            h.pack(&[0u8; 64], 1, &mut out),
            Err(Error::Buffer { .. })
        ));
        assert!(matches!(
            int.packed_size(usize::MAX / 2),
            Err(Error::TooLarge { .. })
        ));
        // Nothing to reach: any buffer will do.
        assert_eq!(int.pack(&[], 0, &mut []).unwrap(), 0);
    }

    #[test]
    fn padded_pairs_pack_their_data_only() {
        let si = Datatype::basic(BasicType::ShortInt);
        let mut mem = [0u8; 16];
        mem[..2].copy_from_slice(&7i16.to_ne_bytes());
        mem[4..8].copy_from_slice(&9i32.to_ne_bytes());
        mem[8..10].copy_from_slice(&(-1i16).to_ne_bytes());
        mem[12..].copy_from_slice(&3i32.to_ne_bytes());
        let mut out = [0u8; 12];
        assert_eq!(si.pack(&mem, 2, &mut out).unwrap(), 12);
        let mut back = [0u8; 16];
        si.unpack(&out, &mut back, 2).unwrap();
        for r in [0..2, 4..8, 8..10, 12..16] {
            assert_eq!(back[r.clone()], mem[r]);
        }
    }
}
