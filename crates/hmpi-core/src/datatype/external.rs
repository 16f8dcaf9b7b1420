//! The `"external32"` data representation (`MPI_Pack_external`,
//! `MPI_Unpack_external`): the packed bytes of a type with every basic
//! element big-endian, in the standard's sizes, so that any MPI on any
//! machine reads them.
//!
//! The standard's external32 sizes are the sizes of hmpi's basic types
//! (`long` and `MPI_AINT` are 8 bytes, `wchar_t` 4, `long double` 16), so
//! a type packs into as many bytes as [`Datatype::packed_size`] says. Each
//! element is stored big-endian: integers, floats and logicals whole,
//! complex numbers half by half, the pair types (`MPI_DOUBLE_INT`, …)
//! member by member; bytes, characters and booleans as they are. A
//! `long double` is IEEE quadruple precision in external32: on x86-64,
//! whose `long double` is the x87 80-bit format (same exponent, 64-bit
//! significand with an explicit integer bit), it is converted exactly on
//! packing and rounded toward zero on unpacking.
//!
//! The basic elements are found through the type's constructor
//! ([`Datatype::constructor`]): a type of one basic type is that type
//! throughout; a struct is its members in order; any other constructor is
//! copies of the type it was built from.
//!
//! ```
//! use hmpi_core::datatype::{BasicType, Datatype};
//!
//! let int = Datatype::basic(BasicType::I32);
//! let mut out = [0u8; 8];
//! let v = [1i32, -2];
//! let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
//! int.pack_external(&bytes, 2, &mut out).unwrap();
//! assert_eq!(out, [0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe]);
//! ```

use super::contents::Constructor;
use super::typemap::{BasicType, Datatype};
use crate::{Error, Result};

/// How one piece of a basic element is converted.
#[derive(Clone, Copy)]
enum Piece {
    /// `n` bytes in the machine's order, big-endian in external32.
    Swap(usize),
    /// A C `long double` (16 bytes), IEEE quadruple precision in
    /// external32.
    Quad,
}

/// The pieces of one element of a basic type, in memory order (packed:
/// without the pair types' padding).
fn pieces(b: BasicType) -> &'static [Piece] {
    use BasicType::*;
    use Piece::{Quad, Swap};
    match b {
        I8 | U8 | Bool | Logical1 | Char | Byte | Packed => &[Swap(1)],
        I16 | U16 | F16 | Logical2 => &[Swap(2)],
        I32 | U32 | F32 | Logical4 | WChar => &[Swap(4)],
        I64 | U64 | F64 | Logical8 => &[Swap(8)],
        I128 | U128 | F128 | Logical16 => &[Swap(16)],
        LongDouble => &[Quad],
        ComplexF16 => &[Swap(2), Swap(2)],
        ComplexF32 | FloatInt | TwoInt | TwoF32 => &[Swap(4), Swap(4)],
        ComplexF64 | TwoF64 => &[Swap(8), Swap(8)],
        ComplexLongDouble => &[Quad, Quad],
        ComplexF128 => &[Swap(16), Swap(16)],
        DoubleInt | LongInt => &[Swap(8), Swap(4)],
        ShortInt => &[Swap(2), Swap(4)],
        LongDoubleInt => &[Quad, Swap(4)],
    }
}

/// Calls `f(b, n)` for the basic elements of `times` elements of `t`, in
/// packing order, `n` consecutive elements of basic type `b` at a time.
fn components(
    t: &Datatype,
    times: usize,
    f: &mut dyn FnMut(BasicType, usize) -> Result<()>,
) -> Result<()> {
    if times == 0 || t.size() == 0 {
        return Ok(());
    }
    if let Some(b) = t.basic_type() {
        let per = t.size() / b.size();
        let n = per.checked_mul(times).ok_or_else(|| Error::Arg {
            reason: "the packed size overflows".into(),
        })?;
        return f(b, n);
    }
    use Constructor as K;
    let old = match t.constructor() {
        K::Struct {
            blocklengths,
            types,
            ..
        } => {
            for _ in 0..times {
                for (&bl, ty) in blocklengths.iter().zip(types) {
                    components(ty, bl, f)?;
                }
            }
            return Ok(());
        }
        K::Dup(old)
        | K::Contiguous { old, .. }
        | K::Vector { old, .. }
        | K::Hvector { old, .. }
        | K::Indexed { old, .. }
        | K::Hindexed { old, .. }
        | K::IndexedBlock { old, .. }
        | K::HindexedBlock { old, .. }
        | K::Subarray { old, .. }
        | K::Darray { old, .. }
        | K::Resized { old, .. } => old,
        // A predefined or Fortran-kind type is of one basic type (handled
        // above); nothing else has several.
        _ => {
            return Err(Error::Type {
                reason: "the datatype's basic elements are unknown".into(),
            })
        }
    };
    // Every other constructor holds whole copies of `old`.
    components(old, t.size() / old.size() * times, f)
}

/// Converts `n` elements of `b` at the start of `data` between the
/// machine's representation and external32 (`to`: towards external32);
/// returns the bytes converted.
fn convert(b: BasicType, n: usize, data: &mut [u8], to: bool) -> usize {
    let ps = pieces(b);
    let mut at = 0;
    for _ in 0..n {
        for &p in ps {
            match p {
                Piece::Swap(k) => {
                    if cfg!(target_endian = "little") {
                        data[at..at + k].reverse();
                    }
                    at += k;
                }
                Piece::Quad => {
                    let x: &mut [u8; 16] = (&mut data[at..at + 16])
                        .try_into()
                        .expect("16 bytes were sliced");
                    if to {
                        long_double_to_external(x);
                    } else {
                        long_double_from_external(x);
                    }
                    at += 16;
                }
            }
        }
    }
    at
}

/// A `long double` to IEEE quadruple precision, big-endian.
fn long_double_to_external(x: &mut [u8; 16]) {
    if cfg!(target_arch = "x86_64") {
        // x87: significand (explicit integer bit 63) in bytes 0..8, sign
        // and exponent in bytes 8..10, little-endian. The exponent bias is
        // the same as binary128's; the fraction is the 63 bits below the
        // integer bit.
        let m = u64::from_le_bytes(x[..8].try_into().expect("8 bytes"));
        let se = u16::from_le_bytes([x[8], x[9]]);
        let frac = u128::from(m & !(1 << 63)) << 49;
        *x = ((u128::from(se) << 112) | frac).to_be_bytes();
    } else {
        // Already binary128 in the machine's order.
        *x = u128::from_ne_bytes(*x).to_be_bytes();
    }
}

/// IEEE quadruple precision, big-endian, to a `long double`.
fn long_double_from_external(x: &mut [u8; 16]) {
    let v = u128::from_be_bytes(*x);
    if cfg!(target_arch = "x86_64") {
        let se = (v >> 112) as u16;
        let exp = se & 0x7fff;
        let frac = v & ((1u128 << 112) - 1);
        let mut m = (frac >> 49) as u64;
        if exp != 0 {
            m |= 1 << 63;
        }
        if exp == 0x7fff && frac != 0 && m << 1 == 0 {
            // A NaN whose payload lies below x87's precision stays a NaN.
            m |= 1 << 62;
        }
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&m.to_le_bytes());
        out[8..10].copy_from_slice(&se.to_le_bytes());
        *x = out;
    } else {
        *x = v.to_ne_bytes();
    }
}

impl Datatype {
    /// Bytes of `count` elements in external32 (the packed size: the
    /// standard's sizes are hmpi's).
    pub fn external32_size(&self, count: usize) -> Result<usize> {
        self.packed_size(count)
    }

    /// Converts `count` elements packed in the machine's representation
    /// (`data`, at least their packed size) to external32 in place, or
    /// back (`to == false`).
    fn convert_packed(&self, data: &mut [u8], count: usize, to: bool) -> Result<()> {
        let mut at = 0;
        components(self, count, &mut |b, n| {
            let need = n.checked_mul(b.size()).filter(|&k| k <= data.len() - at);
            if need.is_none() {
                return Err(Error::Buffer {
                    reason: "the external32 data is shorter than its elements".into(),
                });
            }
            at += convert(b, n, &mut data[at..], to);
            Ok(())
        })
    }

    /// Packs `count` elements of `buf` (element 0 at `buf[0]`) into the
    /// start of `out` in external32; returns the bytes written.
    pub fn pack_external(&self, buf: &[u8], count: usize, out: &mut [u8]) -> Result<usize> {
        let n = self.pack(buf, count, out)?;
        self.convert_packed(&mut out[..n], count, true)?;
        Ok(n)
    }

    /// Unpacks `count` whole elements in external32 from the start of
    /// `data` into `buf` (element 0 at `buf[0]`); returns the bytes used.
    pub fn unpack_external(&self, data: &[u8], buf: &mut [u8], count: usize) -> Result<usize> {
        let native = self.external_to_native(data, count)?;
        self.unpack(&native, buf, count)
    }

    /// [`Datatype::pack_external`] from a raw base pointer.
    ///
    /// # Safety
    /// The type map of every one of the `count` elements is readable at
    /// `base` (element `i` at `base + i × extent`).
    pub unsafe fn pack_external_raw(
        &self,
        base: *const u8,
        count: usize,
        out: &mut [u8],
    ) -> Result<usize> {
        // SAFETY: the caller's guarantee.
        let n = unsafe { self.pack_raw(base, count, out) }?;
        self.convert_packed(&mut out[..n], count, true)?;
        Ok(n)
    }

    /// [`Datatype::unpack_external`] to a raw base pointer.
    ///
    /// # Safety
    /// The type map of every one of the `count` elements is writable at
    /// `base` (element `i` at `base + i × extent`).
    pub unsafe fn unpack_external_raw(
        &self,
        data: &[u8],
        base: *mut u8,
        count: usize,
    ) -> Result<usize> {
        let native = self.external_to_native(data, count)?;
        // SAFETY: the caller's guarantee; `native` is a buffer of its own.
        unsafe { self.unpack_raw(&native, base, count) }
    }

    /// The first `count` elements' bytes of `data`, converted from
    /// external32 ([`Error::Buffer`] if `data` is shorter).
    fn external_to_native(&self, data: &[u8], count: usize) -> Result<Vec<u8>> {
        let len = self.packed_size(count)?;
        if data.len() < len {
            return Err(Error::Buffer {
                reason: format!(
                    "{count} elements need {len} bytes of external32 data, {} are there",
                    data.len()
                ),
            });
        }
        let mut native = data[..len].to_vec();
        self.convert_packed(&mut native, count, false)?;
        Ok(native)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::{Equivalence, UserDatatype};

    fn ne<T: Equivalence>(v: &[T]) -> Vec<u8> {
        use crate::datatype::Buffer;
        v.as_bytes().to_vec()
    }

    #[test]
    fn known_values_are_big_endian() {
        let t = i64::equivalent_datatype();
        let mut out = [0u8; 8];
        t.pack_external(&ne(&[0x0102_0304_0506_0708i64]), 1, &mut out)
            .unwrap();
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8]);
        let d = f64::equivalent_datatype();
        d.pack_external(&ne(&[1.0f64]), 1, &mut out).unwrap();
        assert_eq!(out, [0x3f, 0xf0, 0, 0, 0, 0, 0, 0]);
        let f = f32::equivalent_datatype();
        let mut o4 = [0u8; 4];
        f.pack_external(&ne(&[-2.5f32]), 1, &mut o4).unwrap();
        assert_eq!(o4, [0xc0, 0x20, 0, 0]);
        let s = i16::equivalent_datatype();
        let mut o2 = [0u8; 2];
        s.pack_external(&ne(&[0x1234i16]), 1, &mut o2).unwrap();
        assert_eq!(o2, [0x12, 0x34]);
        // Bytes stay as they are.
        let b = Datatype::basic(BasicType::Byte);
        let mut o3 = [0u8; 3];
        b.pack_external(&[7, 8, 9], 3, &mut o3).unwrap();
        assert_eq!(o3, [7, 8, 9]);
    }

    #[test]
    fn pairs_and_complex_numbers_swap_member_by_member() {
        // MPI_SHORT_INT: short at 0, int at 4 (6 bytes of data).
        let si = Datatype::basic(BasicType::ShortInt);
        let mut mem = [0u8; 8];
        mem[..2].copy_from_slice(&0x0102i16.to_ne_bytes());
        mem[4..].copy_from_slice(&0x0304_0506i32.to_ne_bytes());
        let mut out = [0u8; 6];
        assert_eq!(si.pack_external(&mem, 1, &mut out).unwrap(), 6);
        assert_eq!(out, [1, 2, 3, 4, 5, 6]);
        let mut back = [0u8; 8];
        si.unpack_external(&out, &mut back, 1).unwrap();
        assert_eq!((&back[..2], &back[4..]), (&mem[..2], &mem[4..]));
        // A complex float: two big-endian floats.
        let c = Datatype::basic(BasicType::ComplexF32);
        let mut o = [0u8; 8];
        c.pack_external(&ne(&[1.0f32, -2.0]), 1, &mut o).unwrap();
        assert_eq!(o, [0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0]);
    }

    #[test]
    fn mixed_structs_and_vectors_round_trip() {
        // struct { int a; double b; char c; } with a vector of it.
        let (i, d, ch) = (
            i32::equivalent_datatype(),
            f64::equivalent_datatype(),
            Datatype::basic(BasicType::Char),
        );
        let s = UserDatatype::structured(&[1, 1, 2], &[0, 8, 16], &[&i, &d, &ch]).unwrap();
        assert_eq!((s.size(), s.extent()), (14, 24));
        let v = UserDatatype::vector(2, 1, 2, &s).unwrap();
        let mut mem = vec![0u8; 24 * 3];
        for (e, base) in [(0usize, 0usize), (1, 48)] {
            mem[base..base + 4].copy_from_slice(&(10 + e as i32).to_ne_bytes());
            mem[base + 8..base + 16].copy_from_slice(&(0.5 + e as f64).to_ne_bytes());
            mem[base + 16] = b'x';
            mem[base + 17] = b'y' + e as u8;
        }
        let mut out = vec![0u8; 28];
        assert_eq!(v.pack_external(&mem, 1, &mut out).unwrap(), 28);
        let mut want = Vec::new();
        for e in 0..2u8 {
            want.extend_from_slice(&(10 + i32::from(e)).to_be_bytes());
            want.extend_from_slice(&(0.5 + f64::from(e)).to_be_bytes());
            want.extend_from_slice(&[b'x', b'y' + e]);
        }
        assert_eq!(out, want);
        let mut back = vec![0u8; mem.len()];
        assert_eq!(v.unpack_external(&out, &mut back, 1).unwrap(), 28);
        // Only the type map's bytes are written, and they are all of `mem`'s
        // non-zero bytes.
        assert_eq!(back, mem);
        // Too few bytes to unpack is an error.
        assert!(matches!(
            v.unpack_external(&out[..27], &mut back, 1),
            Err(Error::Buffer { .. })
        ));
    }

    #[test]
    fn long_doubles_become_quadruple_precision() {
        let ld = Datatype::basic(BasicType::LongDouble);
        // 1.0 as the machine's long double.
        let mut one = [0u8; 16];
        if cfg!(target_arch = "x86_64") {
            one[..8].copy_from_slice(&(1u64 << 63).to_le_bytes());
            one[8..10].copy_from_slice(&0x3fffu16.to_le_bytes());
        } else {
            one = (0x3fffu128 << 112).to_ne_bytes();
        }
        let mut out = [0u8; 16];
        ld.pack_external(&one, 1, &mut out).unwrap();
        let mut want = [0u8; 16];
        want[0] = 0x3f;
        want[1] = 0xff;
        assert_eq!(out, want);
        let mut back = [0u8; 16];
        ld.unpack_external(&out, &mut back, 1).unwrap();
        assert_eq!(back, one);
        // -3.0: sign set, exponent 0x4000, fraction .1 (binary).
        let q = (0xc000u128 << 112) | (1u128 << 111);
        let mut b = [0u8; 16];
        ld.unpack_external(&q.to_be_bytes(), &mut b, 1).unwrap();
        let mut again = [0u8; 16];
        ld.pack_external(&b, 1, &mut again).unwrap();
        assert_eq!(u128::from_be_bytes(again), q);
    }
}
