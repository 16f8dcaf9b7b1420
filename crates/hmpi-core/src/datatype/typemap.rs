//! Datatypes as type maps: the predefined basic types ([`BasicType`]), the
//! [`Datatype`] value, and the derived type constructors of
//! [`UserDatatype`] (contiguous, vector, hvector, indexed, hindexed,
//! indexed block, hindexed block, struct, resized, dup, subarray).
//!
//! A type is flattened when it is built into its *type map*: the list of
//! `(offset, length)` byte blocks of one element, in the order MPI packs
//! them, with neighbouring blocks merged, plus its size, lower and upper
//! bound (extent = ub − lb), true bounds and alignment. `count` elements
//! of a type sit at `buf + i × extent`. The list is held as *strided
//! runs*: `count` blocks of one length, `stride` bytes apart, so that a
//! vector of any count of blocks is one entry.
//!
//! * A *dense* type (one block whose length is the extent, or no block)
//!   travels straight from and into the program's buffer.
//! * A struct type pads its extent to the alignment of its most aligned
//!   member, as C lays out an array of structs.
//! * A type map longer than [`MAX_BLOCKS`] blocks is refused with
//!   [`Error::Type`] rather than exhausting memory; displacements and
//!   sizes that overflow are [`Error::Arg`].
//!
//! Building costs time and memory proportional to the description given
//! and to the runs of the result: a contiguous, vector or hvector type of
//! a type that is one run (any predefined type, a vector of one, …) is
//! one run whatever its count; blocks of zero elements and types without
//! data cost nothing. Copies of a type of several runs (a struct, an
//! indexed type, a vector of vectors) are walked: `n` of them hold `n`
//! times its runs. Blocks are still counted as MPI lays them out: a map
//! of more than [`MAX_BLOCKS`] blocks is refused, whatever its runs.

use super::contents::{Constructor, How};
use crate::{Error, Result};
use std::fmt;
use std::sync::{Arc, OnceLock};

/// The most blocks a type map may have (16 Mi; the limit of the engine's
/// flat maps, kept as MPI-visible behaviour).
pub const MAX_BLOCKS: usize = 1 << 24;

/// One run of bytes of an element: offset from the element's start, length.
pub type Block = (isize, usize);

/// The predefined basic types of MPI, by what their bytes hold (the C and
/// Fortran names that share a layout share a kind: `MPI_INT`,
/// `MPI_INT32_T` and `MPI_INTEGER4` are all [`BasicType::I32`]).
///
/// Sizes and alignments are those of the LP64 C ABI (`long` is 8 bytes,
/// `long double` 16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BasicType {
    /// Signed 8-bit integer (`MPI_INT8_T`, `MPI_SIGNED_CHAR`, `MPI_INTEGER1`).
    I8,
    /// Unsigned 8-bit integer (`MPI_UINT8_T`, `MPI_UNSIGNED_CHAR`).
    U8,
    /// Signed 16-bit integer (`MPI_SHORT`, `MPI_INT16_T`).
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// Signed 32-bit integer (`MPI_INT`, `MPI_INTEGER`).
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 64-bit integer (`MPI_LONG`, `MPI_LONG_LONG`, `MPI_AINT`,
    /// `MPI_COUNT`, `MPI_OFFSET`).
    I64,
    /// Unsigned 64-bit integer.
    U64,
    /// Signed 128-bit integer (`MPI_INTEGER16`).
    I128,
    /// Unsigned 128-bit integer (Rust's `u128`).
    U128,
    /// IEEE half precision (`MPI_REAL2`).
    F16,
    /// IEEE single precision (`MPI_FLOAT`, `MPI_REAL`).
    F32,
    /// IEEE double precision (`MPI_DOUBLE`, `MPI_DOUBLE_PRECISION`).
    F64,
    /// C `long double` (x87 extended precision in 16 bytes).
    LongDouble,
    /// IEEE quadruple precision (`MPI_REAL16`).
    F128,
    /// Complex of two halves (`MPI_COMPLEX4`).
    ComplexF16,
    /// Complex of two floats (`MPI_C_FLOAT_COMPLEX`, `MPI_COMPLEX`).
    ComplexF32,
    /// Complex of two doubles (`MPI_C_DOUBLE_COMPLEX`, `MPI_DOUBLE_COMPLEX`).
    ComplexF64,
    /// Complex of two `long double`s.
    ComplexLongDouble,
    /// Complex of two quadruple precision numbers (`MPI_COMPLEX32`).
    ComplexF128,
    /// C `bool` (`MPI_C_BOOL`, `MPI_CXX_BOOL`).
    Bool,
    /// Fortran `LOGICAL*1`.
    Logical1,
    /// Fortran `LOGICAL*2`.
    Logical2,
    /// Fortran `LOGICAL` and `LOGICAL*4`.
    Logical4,
    /// Fortran `LOGICAL*8`.
    Logical8,
    /// Fortran `LOGICAL*16`.
    Logical16,
    /// A character (`MPI_CHAR`, `MPI_CHARACTER`): not a number.
    Char,
    /// `wchar_t` (`MPI_WCHAR`): not a number.
    WChar,
    /// Uninterpreted bytes (`MPI_BYTE`).
    Byte,
    /// Packed data (`MPI_PACKED`).
    Packed,
    /// `struct { float; int; }` (`MPI_FLOAT_INT`).
    FloatInt,
    /// `struct { double; int; }` (`MPI_DOUBLE_INT`): 12 bytes of data in 16.
    DoubleInt,
    /// `struct { long; int; }` (`MPI_LONG_INT`): 12 bytes of data in 16.
    LongInt,
    /// `struct { int; int; }` (`MPI_2INT`, `MPI_2INTEGER`).
    TwoInt,
    /// `struct { short; int; }` (`MPI_SHORT_INT`): 6 bytes of data in 8.
    ShortInt,
    /// `struct { long double; int; }` (`MPI_LONG_DOUBLE_INT`).
    LongDoubleInt,
    /// Two floats, value and index (`MPI_2REAL`).
    TwoF32,
    /// Two doubles, value and index (`MPI_2DOUBLE_PRECISION`).
    TwoF64,
}

impl BasicType {
    /// Every basic type.
    pub const ALL: &'static [BasicType] = &[
        BasicType::I8,
        BasicType::U8,
        BasicType::I16,
        BasicType::U16,
        BasicType::I32,
        BasicType::U32,
        BasicType::I64,
        BasicType::U64,
        BasicType::I128,
        BasicType::U128,
        BasicType::F16,
        BasicType::F32,
        BasicType::F64,
        BasicType::LongDouble,
        BasicType::F128,
        BasicType::ComplexF16,
        BasicType::ComplexF32,
        BasicType::ComplexF64,
        BasicType::ComplexLongDouble,
        BasicType::ComplexF128,
        BasicType::Bool,
        BasicType::Logical1,
        BasicType::Logical2,
        BasicType::Logical4,
        BasicType::Logical8,
        BasicType::Logical16,
        BasicType::Char,
        BasicType::WChar,
        BasicType::Byte,
        BasicType::Packed,
        BasicType::FloatInt,
        BasicType::DoubleInt,
        BasicType::LongInt,
        BasicType::TwoInt,
        BasicType::ShortInt,
        BasicType::LongDoubleInt,
        BasicType::TwoF32,
        BasicType::TwoF64,
    ];

    /// Bytes of data in one element, and its alignment.
    pub const fn size_align(self) -> (usize, usize) {
        use BasicType::*;
        match self {
            I8 | U8 | Bool | Logical1 | Char | Byte | Packed => (1, 1),
            I16 | U16 | F16 | Logical2 => (2, 2),
            I32 | U32 | F32 | Logical4 | WChar => (4, 4),
            I64 | U64 | F64 | Logical8 => (8, 8),
            I128 | U128 | F128 | Logical16 | LongDouble => (16, 16),
            ComplexF16 => (4, 2),
            ComplexF32 => (8, 4),
            ComplexF64 => (16, 8),
            ComplexLongDouble | ComplexF128 => (32, 16),
            FloatInt | TwoInt | TwoF32 => (8, 4),
            DoubleInt | LongInt => (12, 8),
            ShortInt => (6, 4),
            LongDoubleInt => (20, 16),
            TwoF64 => (16, 8),
        }
    }

    /// Bytes of data in one element.
    pub const fn size(self) -> usize {
        self.size_align().0
    }

    /// The alignment of one element.
    pub const fn alignment(self) -> usize {
        self.size_align().1
    }

    /// The data blocks of one element (all types but the padded pairs are
    /// one block from 0) and its extent.
    pub const fn layout(self) -> (&'static [Block], isize) {
        use BasicType::*;
        match self {
            DoubleInt | LongInt => (&[(0, 12)], 16),
            ShortInt => (&[(0, 2), (4, 4)], 8),
            LongDoubleInt => (&[(0, 20)], 32),
            _ => match self.size() {
                1 => (&[(0, 1)], 1),
                2 => (&[(0, 2)], 2),
                4 => (&[(0, 4)], 4),
                6 => (&[(0, 6)], 6),
                8 => (&[(0, 8)], 8),
                12 => (&[(0, 12)], 12),
                16 => (&[(0, 16)], 16),
                20 => (&[(0, 20)], 20),
                _ => (&[(0, 32)], 32),
            },
        }
    }

    fn index(self) -> usize {
        // `ALL` lists every variant once, in declaration order.
        self as usize
    }
}

/// Which basic types the elements of a type map are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Elements {
    /// No data.
    None,
    /// Every element of data is of this basic type.
    One(BasicType),
    /// Several basic types.
    Mixed,
}

impl Elements {
    fn join(self, other: Elements) -> Elements {
        match (self, other) {
            (Elements::None, x) | (x, Elements::None) => x,
            (Elements::One(a), Elements::One(b)) if a == b => Elements::One(a),
            _ => Elements::Mixed,
        }
    }
}

/// A flattened type: what a [`Datatype`] shares.
#[derive(Clone)]
pub(crate) struct TypeMap {
    pub(crate) size: usize,
    pub(crate) lb: isize,
    pub(crate) ub: isize,
    pub(crate) true_lb: isize,
    pub(crate) true_ub: isize,
    pub(crate) align: usize,
    /// The type map, in packing order, as strided runs.
    pub(crate) runs: Vec<Run>,
    /// Blocks of the type map (the runs' counts added up).
    nblocks: usize,
    /// The type map as a list of blocks, made when first asked for.
    flat: OnceLock<Vec<Block>>,
    elements: Elements,
    pub(crate) predefined: Option<BasicType>,
    pub(crate) handle: Option<usize>,
    /// How the type was built (`None`: a predefined type).
    pub(crate) how: Option<Arc<How>>,
}

/// A datatype: the layout of one element of a message in memory (rsmpi's
/// `DatatypeRef`/`UserDatatype` as one value). Cheap to clone (shared),
/// `Send + Sync`, immutable.
///
/// ```
/// use hmpi_core::datatype::{BasicType, Datatype, UserDatatype};
///
/// let int = Datatype::basic(BasicType::I32);
/// let column = UserDatatype::vector(4, 1, 4, &int).unwrap(); // a 4x4 column
/// assert_eq!((column.size(), column.extent()), (16, 52));
/// assert!(!column.is_dense());
/// ```
#[derive(Clone)]
pub struct Datatype(pub(crate) Arc<TypeMap>);

impl fmt::Debug for Datatype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &*self.0;
        let mut d = f.debug_struct("Datatype");
        if let Some(b) = m.predefined {
            d.field("predefined", &b);
        }
        d.field("size", &m.size)
            .field("lb", &m.lb)
            .field("ub", &m.ub)
            .field("blocks", &m.nblocks)
            .finish()
    }
}

impl AsRef<Datatype> for Datatype {
    fn as_ref(&self) -> &Datatype {
        self
    }
}

impl Datatype {
    /// The predefined datatype of a basic type.
    pub fn basic(b: BasicType) -> Datatype {
        Datatype::basic_static(b).clone()
    }

    /// The predefined datatype of a basic type, borrowed from the table
    /// that holds it for the life of the process (no reference count).
    pub(crate) fn basic_static(b: BasicType) -> &'static Datatype {
        static TABLE: OnceLock<Vec<Datatype>> = OnceLock::new();
        let t = TABLE.get_or_init(|| {
            BasicType::ALL
                .iter()
                .map(|&b| {
                    let (blocks, extent) = b.layout();
                    let (size, align) = b.size_align();
                    Datatype(Arc::new(TypeMap {
                        size,
                        lb: 0,
                        ub: extent,
                        true_lb: blocks.first().map_or(0, |b| b.0),
                        true_ub: blocks.last().map_or(0, |b| b.0 + b.1 as isize),
                        align,
                        runs: blocks
                            .iter()
                            .map(|&(off, len)| Run::one(off, len))
                            .collect(),
                        nblocks: blocks.len(),
                        flat: OnceLock::new(),
                        elements: Elements::One(b),
                        predefined: Some(b),
                        handle: None,
                        how: None,
                    }))
                })
                .collect()
        });
        &t[b.index()]
    }

    /// Bytes of data in one element.
    #[inline]
    pub fn size(&self) -> usize {
        self.0.size
    }

    /// The lower bound.
    #[inline]
    pub fn lower_bound(&self) -> isize {
        self.0.lb
    }

    /// The upper bound.
    #[inline]
    pub fn upper_bound(&self) -> isize {
        self.0.ub
    }

    /// Upper bound − lower bound: the distance between consecutive elements.
    #[inline]
    pub fn extent(&self) -> isize {
        self.0.ub - self.0.lb
    }

    /// The lowest byte of data (without resizing or padding).
    #[inline]
    pub fn true_lower_bound(&self) -> isize {
        self.0.true_lb
    }

    /// One past the highest byte of data.
    #[inline]
    pub fn true_upper_bound(&self) -> isize {
        self.0.true_ub
    }

    /// True upper bound − true lower bound.
    #[inline]
    pub fn true_extent(&self) -> isize {
        self.0.true_ub - self.0.true_lb
    }

    /// The alignment of the most aligned basic element.
    #[inline]
    pub fn alignment(&self) -> usize {
        self.0.align
    }

    /// The type map: `(offset, length)` blocks of one element, in packing
    /// order, neighbours merged. Listed when first asked for (one pair per
    /// block; [`Datatype::block_count`] counts them without listing).
    pub fn blocks(&self) -> &[Block] {
        self.0.flat.get_or_init(|| {
            let mut v = Vec::with_capacity(self.0.nblocks);
            for r in &self.0.runs {
                for k in 0..r.count {
                    v.push((
                        r.off.wrapping_add((k as isize).wrapping_mul(r.stride)),
                        r.len,
                    ));
                }
            }
            v
        })
    }

    /// The number of blocks of the type map.
    #[inline]
    pub fn block_count(&self) -> usize {
        self.0.nblocks
    }

    /// The type map as strided runs, in packing order.
    #[inline]
    pub(crate) fn runs(&self) -> &[Run] {
        &self.0.runs
    }

    /// If `count` elements are one run of bytes: its offset from the buffer.
    #[inline]
    pub fn dense_offset(&self) -> Option<isize> {
        match self.0.runs.as_slice() {
            [r] if r.count == 1 && r.len as isize == self.extent() => Some(r.off),
            [] => Some(0),
            _ => None,
        }
    }

    /// Whether any number of elements is one run of bytes (sent without
    /// packing).
    #[inline]
    pub fn is_dense(&self) -> bool {
        self.dense_offset().is_some()
    }

    /// The basic type of every element of data, when there is one (for
    /// reductions): `Some` for predefined types and derived types built
    /// from one basic type only.
    pub fn basic_type(&self) -> Option<BasicType> {
        match self.0.elements {
            Elements::One(b) => Some(b),
            _ => None,
        }
    }

    /// Whether the type has several basic types (a struct of an `int` and a
    /// `double`, say).
    pub fn is_mixed(&self) -> bool {
        self.0.elements == Elements::Mixed
    }

    /// `Some` if this is a predefined type itself (not derived from one).
    pub fn predefined(&self) -> Option<BasicType> {
        self.0.predefined
    }

    /// This datatype without a reference count of its own: borrowed from
    /// the process's table when it is predefined (every predefined
    /// datatype is a clone of that table's entry), cloned otherwise. For
    /// buffers that implement [`Buffer::element_datatype_ref`](super::Buffer::element_datatype_ref)
    /// over a datatype they hold.
    pub fn to_static(&self) -> std::borrow::Cow<'static, Datatype> {
        match self.0.predefined {
            Some(b) => std::borrow::Cow::Borrowed(Datatype::basic_static(b)),
            None => std::borrow::Cow::Owned(self.clone()),
        }
    }

    /// The handle under which a foreign interface (the C library) knows
    /// this type, if it registered one with [`Datatype::with_handle`].
    pub fn handle(&self) -> Option<usize> {
        self.0.handle
    }

    /// This type, tagged with the handle a foreign interface knows it by
    /// (what user reduction functions of that interface are given). Copies
    /// the type map unless this value is its only owner.
    pub fn with_handle(mut self, handle: usize) -> Datatype {
        Arc::make_mut(&mut self.0).handle = Some(handle);
        self
    }

    /// Whether two values are the same type object (not merely equal maps).
    pub fn ptr_eq(&self, other: &Datatype) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

// ---------------------------------------------------------------- building

fn overflow() -> Error {
    Error::Arg {
        reason: "the datatype's displacements or size overflow".into(),
    }
}

fn too_many_blocks() -> Error {
    Error::Type {
        reason: format!("the datatype's type map has more than {MAX_BLOCKS} blocks"),
    }
}

fn add(a: isize, b: isize) -> Result<isize> {
    a.checked_add(b).ok_or_else(overflow)
}

fn mul(a: isize, b: isize) -> Result<isize> {
    a.checked_mul(b).ok_or_else(overflow)
}

fn signed(n: usize) -> Result<isize> {
    isize::try_from(n).map_err(|_| overflow())
}

/// `count` blocks of `len` bytes, the first at `off`, each `stride` bytes
/// after the one before (a run of one block has stride 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) off: isize,
    pub(crate) len: usize,
    pub(crate) count: usize,
    pub(crate) stride: isize,
}

impl Run {
    fn one(off: isize, len: usize) -> Run {
        Run {
            off,
            len,
            count: 1,
            stride: 0,
        }
    }

    /// The offset of the last block (checked when the run was made).
    fn last(&self) -> isize {
        self.off
            .wrapping_add((self.count as isize - 1).wrapping_mul(self.stride))
    }

    /// A run of `count` blocks (at least one), its first and last offsets
    /// and ends checked for overflow; blocks that touch are one block.
    fn checked(off: isize, len: usize, count: usize, stride: isize) -> Result<Run> {
        let span = mul(signed(count)? - 1, stride)?;
        let len_i = signed(len)?;
        add(add(off, span)?, len_i)?;
        add(off, len_i)?;
        if count > 1 && stride == len_i {
            let total = len.checked_mul(count).ok_or_else(overflow)?;
            add(off, signed(total)?)?;
            return Ok(Run::one(off, total));
        }
        Ok(Run {
            off,
            len,
            count,
            stride: if count > 1 { stride } else { 0 },
        })
    }
}

/// Accumulates a type map.
pub(crate) struct Builder {
    runs: Vec<Run>,
    nblocks: usize,
    size: usize,
    bounds: Option<(isize, isize, isize, isize)>, // lb, ub, true_lb, true_ub
    align: usize,
    elements: Elements,
}

impl Builder {
    pub(crate) fn new() -> Self {
        Builder {
            runs: Vec::new(),
            nblocks: 0,
            size: 0,
            bounds: None,
            align: 1,
            elements: Elements::None,
        }
    }

    /// Appends the blocks of `r` (checked, `len > 0`) as a flat list of
    /// blocks would take them one by one: a block that starts where the
    /// list's last block ends merges into it.
    fn push_run(&mut self, r: Run) -> Result<()> {
        if r.len == 0 || r.count == 0 {
            return Ok(());
        }
        let mut rest = r;
        if let Some(last) = self.runs.last_mut() {
            let end = last.last().checked_add(last.len as isize);
            if end == Some(r.off) {
                // The first block of `r` extends the last block.
                let merged = Run::one(last.last(), last.len + r.len);
                if last.count == 1 {
                    *last = merged;
                } else {
                    last.count -= 1;
                    if last.count == 1 {
                        last.stride = 0;
                    }
                    self.runs.push(merged);
                }
                if r.count == 1 {
                    return Ok(());
                }
                // The others do not touch it (touching blocks are one).
                rest = Run {
                    off: r.off + r.stride,
                    count: r.count - 1,
                    ..r
                };
                if rest.count == 1 {
                    rest.stride = 0;
                }
                // `rest` starts a new entry (the merged block is longer).
                if self.nblocks.saturating_add(rest.count) > MAX_BLOCKS {
                    return Err(too_many_blocks());
                }
                self.nblocks += rest.count;
                self.runs.push(rest);
                return Ok(());
            }
        }
        if self.nblocks.saturating_add(rest.count) > MAX_BLOCKS {
            return Err(too_many_blocks());
        }
        self.nblocks += rest.count;
        if let Some(last) = self.runs.last_mut() {
            if last.len == rest.len {
                // Continue the last run when `rest` keeps its stride.
                let step = match (last.count, rest.count) {
                    (1, 1) => rest.off.checked_sub(last.off),
                    (1, _) => Some(rest.stride),
                    _ => Some(last.stride),
                };
                if let Some(step) = step {
                    let next = last.last().checked_add(step);
                    if next == Some(rest.off) && (rest.count == 1 || rest.stride == step) {
                        last.stride = step;
                        last.count += rest.count;
                        return Ok(());
                    }
                }
            }
        }
        self.runs.push(rest);
        Ok(())
    }

    /// Adds `n` elements of `t`, the first at byte `disp`, the others one
    /// extent apart.
    pub(crate) fn add(&mut self, disp: isize, n: usize, t: &Datatype) -> Result<()> {
        self.add_strided(disp, n, t, t.extent())
    }

    /// Adds `n` elements of `t`, the first at byte `disp`, the others
    /// `step` bytes apart.
    fn add_strided(&mut self, disp: isize, n: usize, t: &Datatype, step: isize) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let m = &*t.0;
        let ext = t.extent();
        let span = mul(signed(n)? - 1, step)?;
        let (lo, hi) = (span.min(0), span.max(0));
        let b = (
            add(add(disp, m.lb)?, lo)?,
            add(add(disp, m.ub)?, hi)?,
            add(add(disp, m.true_lb)?, lo)?,
            add(add(disp, m.true_ub)?, hi)?,
        );
        self.bounds = Some(match self.bounds {
            None => b,
            Some(o) => (o.0.min(b.0), o.1.max(b.1), o.2.min(b.2), o.3.max(b.3)),
        });
        self.size = n
            .checked_mul(m.size)
            .and_then(|s| s.checked_add(self.size))
            .filter(|&s| s <= isize::MAX as usize)
            .ok_or_else(overflow)?;
        self.align = self.align.max(m.align);
        self.elements = self.elements.join(m.elements);
        if m.runs.is_empty() {
            // No data: only the bounds count, and they are set above.
            return Ok(());
        }
        match (t.dense_offset(), m.runs.as_slice()) {
            // A gapless element type, elements one extent apart: the n
            // elements are one block.
            (Some(off), _) if m.size as isize == ext && m.size > 0 && step == ext => {
                let len = m.size.checked_mul(n).ok_or_else(overflow)?;
                self.push_run(Run::checked(add(disp, off)?, len, 1, 0)?)
            }
            // One block per element: one run.
            (_, [r]) if r.count == 1 => {
                self.push_run(Run::checked(add(disp, r.off)?, r.len, n, step)?)
            }
            // One run per element, continued by the next element's.
            (_, [r])
                if Some(step) == signed(r.count).ok().and_then(|c| c.checked_mul(r.stride)) =>
            {
                let count = r.count.checked_mul(n).ok_or_else(overflow)?;
                self.push_run(Run::checked(add(disp, r.off)?, r.len, count, r.stride)?)
            }
            _ => {
                if n.saturating_mul(m.nblocks).saturating_add(self.nblocks) > MAX_BLOCKS
                    && m.nblocks > 1
                {
                    return Err(too_many_blocks());
                }
                for i in 0..n {
                    let base = add(disp, mul(i as isize, step)?)?;
                    for r in &m.runs {
                        self.push_run(Run::checked(add(base, r.off)?, r.len, r.count, r.stride)?)?;
                    }
                }
                Ok(())
            }
        }
    }

    pub(crate) fn finish(self, pad_to_align: bool) -> Result<Datatype> {
        let (lb, mut ub, true_lb, true_ub) = self.bounds.unwrap_or((0, 0, 0, 0));
        if pad_to_align {
            let rem = (ub - lb).rem_euclid(self.align as isize);
            if rem != 0 {
                ub = add(ub, self.align as isize - rem)?;
            }
        }
        Ok(Datatype(Arc::new(TypeMap {
            size: self.size,
            lb,
            ub,
            true_lb,
            true_ub,
            align: self.align,
            runs: self.runs,
            nblocks: self.nblocks,
            flat: OnceLock::new(),
            elements: self.elements,
            predefined: None,
            handle: None,
            how: None,
        })))
    }
}

/// The order of the dimensions of an array (for
/// [`UserDatatype::subarray`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Row-major: the last dimension varies fastest (`MPI_ORDER_C`).
    C,
    /// Column-major: the first dimension varies fastest
    /// (`MPI_ORDER_FORTRAN`).
    Fortran,
}

/// A derived datatype and its constructors (rsmpi's names). It is a
/// [`Datatype`] (`Deref`, `From`); every constructor returns an error value
/// for arguments that do not make a type.
///
/// ```
/// use hmpi_core::datatype::{Datatype, Equivalence, UserDatatype};
///
/// let d = f64::equivalent_datatype();
/// let pair = UserDatatype::contiguous(2, &d).unwrap();
/// let rows = UserDatatype::heterogeneous_vector(3, 1, 64, &pair).unwrap();
/// assert_eq!((rows.size(), rows.extent()), (48, 144));
/// assert_eq!(rows.blocks(), &[(0, 16), (64, 16), (128, 16)]);
/// ```
#[derive(Clone, Debug)]
pub struct UserDatatype(Datatype);

impl std::ops::Deref for UserDatatype {
    type Target = Datatype;
    fn deref(&self) -> &Datatype {
        &self.0
    }
}

impl AsRef<Datatype> for UserDatatype {
    fn as_ref(&self) -> &Datatype {
        &self.0
    }
}

impl From<UserDatatype> for Datatype {
    fn from(u: UserDatatype) -> Datatype {
        u.0
    }
}

fn same_len(a: usize, b: usize, what: &str) -> Result<()> {
    if a != b {
        return Err(Error::Arg {
            reason: format!("{a} block lengths but {b} {what}"),
        });
    }
    Ok(())
}

/// Refuses up front a vector of `count` blocks of `bl` elements of `old`
/// whose type map would exceed [`MAX_BLOCKS`] (instead of building it).
fn check_vector_size(count: usize, bl: usize, old: &Datatype) -> Result<()> {
    let per_block = if old.block_count() == 0 {
        0
    } else if old.is_dense() {
        1
    } else {
        bl.saturating_mul(old.block_count())
    };
    if bl > 0 && count.saturating_mul(per_block) > MAX_BLOCKS {
        return Err(Error::Type {
            reason: format!("the datatype's type map would have more than {MAX_BLOCKS} blocks"),
        });
    }
    Ok(())
}

impl UserDatatype {
    /// A type just built, as a derived type.
    pub(crate) fn from_datatype(t: Datatype) -> UserDatatype {
        UserDatatype(t)
    }

    /// `t` recorded as made by `c`.
    fn made(t: UserDatatype, c: Constructor) -> UserDatatype {
        UserDatatype(t.0.made_by(c))
    }

    /// The type as a [`Datatype`].
    pub fn as_datatype(&self) -> &Datatype {
        &self.0
    }

    /// The type as a [`Datatype`], by value.
    pub fn into_datatype(self) -> Datatype {
        self.0
    }

    /// `count` elements of `oldtype`, one after the other
    /// (`MPI_Type_contiguous`).
    pub fn contiguous(count: usize, oldtype: &Datatype) -> Result<UserDatatype> {
        let mut b = Builder::new();
        b.add(0, count, oldtype)?;
        Ok(Self::made(
            UserDatatype(b.finish(false)?),
            Constructor::Contiguous {
                count,
                old: oldtype.clone(),
            },
        ))
    }

    /// `count` blocks of `blocklength` elements, `stride` elements apart
    /// (`MPI_Type_vector`).
    pub fn vector(
        count: usize,
        blocklength: usize,
        stride: isize,
        oldtype: &Datatype,
    ) -> Result<UserDatatype> {
        let step = mul(stride, oldtype.extent())?;
        let t = Self::heterogeneous_vector(count, blocklength, step, oldtype)?;
        Ok(Self::made(
            t,
            Constructor::Vector {
                count,
                blocklength,
                stride,
                old: oldtype.clone(),
            },
        ))
    }

    /// `count` blocks of `blocklength` elements, `stride` bytes apart
    /// (`MPI_Type_create_hvector`).
    pub fn heterogeneous_vector(
        count: usize,
        blocklength: usize,
        stride: isize,
        oldtype: &Datatype,
    ) -> Result<UserDatatype> {
        let t = Self::hvector_map(count, blocklength, stride, oldtype)?;
        Ok(Self::made(
            t,
            Constructor::Hvector {
                count,
                blocklength,
                stride,
                old: oldtype.clone(),
            },
        ))
    }

    /// The type map of an hvector.
    fn hvector_map(
        count: usize,
        blocklength: usize,
        stride: isize,
        oldtype: &Datatype,
    ) -> Result<UserDatatype> {
        let mut b = Builder::new();
        if count == 0 || blocklength == 0 {
            return Ok(UserDatatype(b.finish(false)?));
        }
        let ext = oldtype.extent();
        let whole = oldtype.is_dense() && oldtype.size() as isize == ext && ext > 0;
        if whole && Some(stride) == signed(blocklength).ok().and_then(|l| l.checked_mul(ext)) {
            // The blocks touch: one run of count × blocklength elements.
            let n = count.checked_mul(blocklength).ok_or_else(overflow)?;
            b.add(0, n, oldtype)?;
            return Ok(UserDatatype(b.finish(false)?));
        }
        check_vector_size(count, blocklength, oldtype)?;
        // One block of the vector, then `count` of them `stride` apart (its
        // bounds are affine in the block's index; a block that is one run
        // makes one run of the vector).
        let mut block = Builder::new();
        block.add(0, blocklength, oldtype)?;
        let block = block.finish(false)?;
        b.add_strided(0, count, &block, stride)?;
        Ok(UserDatatype(b.finish(false)?))
    }

    /// Blocks of given lengths at given displacements, in elements of
    /// `oldtype` (`MPI_Type_indexed`).
    pub fn indexed(
        blocklengths: &[usize],
        displacements: &[isize],
        oldtype: &Datatype,
    ) -> Result<UserDatatype> {
        same_len(blocklengths.len(), displacements.len(), "displacements")?;
        let ext = oldtype.extent();
        let mut b = Builder::new();
        for (&n, &d) in blocklengths.iter().zip(displacements) {
            b.add(mul(d, ext)?, n, oldtype)?;
        }
        Ok(Self::made(
            UserDatatype(b.finish(false)?),
            Constructor::Indexed {
                blocklengths: blocklengths.to_vec(),
                displacements: displacements.to_vec(),
                old: oldtype.clone(),
            },
        ))
    }

    /// Blocks of given lengths at given byte displacements
    /// (`MPI_Type_create_hindexed`).
    pub fn heterogeneous_indexed(
        blocklengths: &[usize],
        displacements: &[isize],
        oldtype: &Datatype,
    ) -> Result<UserDatatype> {
        same_len(blocklengths.len(), displacements.len(), "displacements")?;
        let mut b = Builder::new();
        for (&n, &d) in blocklengths.iter().zip(displacements) {
            b.add(d, n, oldtype)?;
        }
        Ok(Self::made(
            UserDatatype(b.finish(false)?),
            Constructor::Hindexed {
                blocklengths: blocklengths.to_vec(),
                displacements: displacements.to_vec(),
                old: oldtype.clone(),
            },
        ))
    }

    /// Blocks of one length at given displacements, in elements
    /// (`MPI_Type_create_indexed_block`).
    pub fn indexed_block(
        blocklength: usize,
        displacements: &[isize],
        oldtype: &Datatype,
    ) -> Result<UserDatatype> {
        let ext = oldtype.extent();
        let mut b = Builder::new();
        if blocklength > 0 {
            for &d in displacements {
                b.add(mul(d, ext)?, blocklength, oldtype)?;
            }
        }
        Ok(Self::made(
            UserDatatype(b.finish(false)?),
            Constructor::IndexedBlock {
                blocklength,
                displacements: displacements.to_vec(),
                old: oldtype.clone(),
            },
        ))
    }

    /// Blocks of one length at given byte displacements
    /// (`MPI_Type_create_hindexed_block`).
    pub fn heterogeneous_indexed_block(
        blocklength: usize,
        displacements: &[isize],
        oldtype: &Datatype,
    ) -> Result<UserDatatype> {
        let mut b = Builder::new();
        if blocklength > 0 {
            for &d in displacements {
                b.add(d, blocklength, oldtype)?;
            }
        }
        Ok(Self::made(
            UserDatatype(b.finish(false)?),
            Constructor::HindexedBlock {
                blocklength,
                displacements: displacements.to_vec(),
                old: oldtype.clone(),
            },
        ))
    }

    /// Blocks of different types at byte displacements
    /// (`MPI_Type_create_struct`); the extent is padded to the alignment
    /// of the most aligned member.
    pub fn structured<T: AsRef<Datatype>>(
        blocklengths: &[usize],
        displacements: &[isize],
        types: &[T],
    ) -> Result<UserDatatype> {
        same_len(blocklengths.len(), displacements.len(), "displacements")?;
        same_len(blocklengths.len(), types.len(), "types")?;
        let mut b = Builder::new();
        for ((&n, &d), t) in blocklengths.iter().zip(displacements).zip(types) {
            b.add(d, n, t.as_ref())?;
        }
        Ok(Self::made(
            UserDatatype(b.finish(true)?),
            Constructor::Struct {
                blocklengths: blocklengths.to_vec(),
                displacements: displacements.to_vec(),
                types: types.iter().map(|t| t.as_ref().clone()).collect(),
            },
        ))
    }

    /// `oldtype` with another lower bound and extent
    /// (`MPI_Type_create_resized`).
    pub fn resized(oldtype: &Datatype, lb: isize, extent: isize) -> Result<UserDatatype> {
        let mut m = (*oldtype.0).clone();
        m.lb = lb;
        m.ub = add(lb, extent)?;
        m.predefined = None;
        m.handle = None;
        m.how = Some(Arc::new(How {
            constructor: Constructor::Resized {
                lb,
                extent,
                old: oldtype.clone(),
            },
            large: false,
        }));
        Ok(UserDatatype(Datatype(Arc::new(m))))
    }

    /// A copy of a type (`MPI_Type_dup`).
    pub fn dup(oldtype: &Datatype) -> UserDatatype {
        let mut m = (*oldtype.0).clone();
        m.predefined = None;
        m.handle = None;
        m.how = Some(Arc::new(How {
            constructor: Constructor::Dup(oldtype.clone()),
            large: false,
        }));
        UserDatatype(Datatype(Arc::new(m)))
    }

    /// The part `starts[d] .. starts[d] + subsizes[d]` of each dimension
    /// `d` of an array of `sizes` elements of `oldtype`
    /// (`MPI_Type_create_subarray`), dimensions in `order`. Its lower bound
    /// is 0 and its extent the whole array's.
    pub fn subarray(
        sizes: &[usize],
        subsizes: &[usize],
        starts: &[usize],
        order: Order,
        oldtype: &Datatype,
    ) -> Result<UserDatatype> {
        let nd = sizes.len();
        if nd == 0 || subsizes.len() != nd || starts.len() != nd {
            return Err(Error::Arg {
                reason: format!(
                    "a subarray needs as many (at least one) sizes, subsizes and starts: \
                     {nd}, {}, {}",
                    subsizes.len(),
                    starts.len()
                ),
            });
        }
        for d in 0..nd {
            if sizes[d] == 0
                || subsizes[d] == 0
                || subsizes[d] > sizes[d]
                || starts[d] > sizes[d] - subsizes[d]
            {
                return Err(Error::Arg {
                    reason: format!(
                        "dimension {d}: size {}, subsize {}, start {} (need 1 <= subsize <= \
                         size and start + subsize <= size)",
                        sizes[d], subsizes[d], starts[d]
                    ),
                });
            }
        }
        // Dimensions from the fastest varying to the slowest.
        let dims: Vec<usize> = match order {
            Order::C => (0..nd).rev().collect(),
            Order::Fortran => (0..nd).collect(),
        };
        let ext = oldtype.extent();
        let mut t = Self::contiguous(subsizes[dims[0]], oldtype)?.0;
        let mut stride = ext; // bytes between neighbours in dimension dims[0]
        let mut offset = mul(signed(starts[dims[0]])?, ext)?;
        for k in 1..nd {
            let (d, inner) = (dims[k], dims[k - 1]);
            stride = mul(stride, signed(sizes[inner])?)?;
            t = Self::heterogeneous_vector(subsizes[d], 1, stride, &t)?.0;
            offset = add(offset, mul(signed(starts[d])?, stride)?)?;
        }
        let whole = mul(stride, signed(sizes[dims[nd - 1]])?)?;
        let placed = Self::heterogeneous_indexed_block(1, &[offset], &t)?;
        let t = Self::resized(&placed, 0, whole)?;
        Ok(Self::made(
            t,
            Constructor::Subarray {
                sizes: sizes.to_vec(),
                subsizes: subsizes.to_vec(),
                starts: starts.to_vec(),
                order,
                old: oldtype.clone(),
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int() -> Datatype {
        Datatype::basic(BasicType::I32)
    }

    #[test]
    fn predefined_sizes_and_pairs() {
        assert_eq!(int().size(), 4);
        assert_eq!(Datatype::basic(BasicType::F64).extent(), 8);
        let di = Datatype::basic(BasicType::DoubleInt);
        assert_eq!((di.size(), di.extent()), (12, 16));
        let si = Datatype::basic(BasicType::ShortInt);
        assert_eq!(si.blocks(), &[(0, 2), (4, 4)]);
        assert!(si.dense_offset().is_none());
        assert_eq!(int().dense_offset(), Some(0));
        for (i, &b) in BasicType::ALL.iter().enumerate() {
            assert_eq!(b.index(), i);
            let t = Datatype::basic(b);
            let (blocks, ext) = b.layout();
            assert_eq!(blocks.iter().map(|b| b.1).sum::<usize>(), b.size(), "{b:?}");
            assert_eq!((t.extent(), t.basic_type()), (ext, Some(b)));
            assert_eq!(ext as usize % b.alignment(), 0, "{b:?}");
        }
    }

    #[test]
    fn vector_map_bounds() {
        let v = UserDatatype::vector(3, 2, 5, &int()).unwrap();
        assert_eq!(v.blocks(), &[(0, 8), (20, 8), (40, 8)]);
        assert_eq!((v.size(), v.lower_bound(), v.upper_bound()), (24, 0, 48));
        assert_eq!(v.basic_type(), Some(BasicType::I32));
    }

    #[test]
    fn struct_extent_is_padded_and_negative_strides_work() {
        let (dbl, ch) = (
            Datatype::basic(BasicType::F64),
            Datatype::basic(BasicType::Char),
        );
        let s =
            UserDatatype::structured(&[1, 1, 1], &[0, 8, 16], &[int(), dbl.clone(), ch]).unwrap();
        assert_eq!((s.size(), s.lower_bound(), s.upper_bound()), (13, 0, 24));
        assert_eq!(s.blocks(), &[(0, 4), (8, 9)]);
        assert!(s.is_mixed() && s.basic_type().is_none());
        // hvector(2, 1, -8, DOUBLE): elements at 0 and -8.
        let h = UserDatatype::heterogeneous_vector(2, 1, -8, &dbl).unwrap();
        assert_eq!((h.lower_bound(), h.upper_bound(), h.extent()), (-8, 8, 16));
        assert_eq!(h.blocks(), &[(0, 8), (-8, 8)]);
        // Contiguous of a gapless type merges into one block.
        assert_eq!(
            UserDatatype::contiguous(1000, &int()).unwrap().blocks(),
            &[(0, 4000)]
        );
    }

    #[test]
    fn overflows_and_block_limits_are_errors() {
        let mut b = Builder::new();
        assert!(matches!(
            b.add(isize::MAX - 2, 2, &int()),
            Err(Error::Arg { .. })
        ));
        let si = Datatype::basic(BasicType::ShortInt);
        assert!(matches!(
            UserDatatype::contiguous(MAX_BLOCKS, &si),
            Err(Error::Type { .. })
        ));
        assert!(matches!(
            UserDatatype::vector(MAX_BLOCKS + 1, 1, 2, &int()),
            Err(Error::Type { .. })
        ));
        assert!(matches!(
            UserDatatype::vector(2, 1, isize::MAX, &int()),
            Err(Error::Arg { .. })
        ));
        assert!(matches!(
            UserDatatype::indexed(&[1, 2], &[0], &int()),
            Err(Error::Arg { .. })
        ));
    }

    #[test]
    fn degenerate_descriptions_cost_nothing() {
        // Zero-length blocks: no data, no walk over the count.
        let v = UserDatatype::vector(i32::MAX as usize, 0, 3, &int()).unwrap();
        assert_eq!((v.size(), v.extent(), v.blocks().len()), (0, 0, 0));
        // Touching blocks are one run.
        let v = UserDatatype::vector(i32::MAX as usize, 2, 2, &int()).unwrap();
        assert_eq!(v.blocks(), &[(0, 8 * i32::MAX as usize)]);
        // A type without data keeps the bounds of all its elements.
        let empty =
            UserDatatype::resized(&UserDatatype::contiguous(0, &int()).unwrap(), 0, 4).unwrap();
        let v = UserDatatype::vector(i32::MAX as usize, 1, 2, &empty).unwrap();
        assert_eq!(v.size(), 0);
        assert_eq!(v.extent(), (i32::MAX as isize - 1) * 8 + 4);
        let c = UserDatatype::contiguous(usize::MAX / 16, &empty).unwrap();
        assert_eq!(c.extent(), (usize::MAX / 16) as isize * 4);
    }

    /// A type description, for building both through the engine and
    /// through a plain list of blocks (the flat engine's algorithm).
    #[derive(Debug, Clone)]
    enum Desc {
        Base(u8),
        Hvector(usize, usize, isize, Box<Desc>),
        Hindexed(Vec<(usize, isize)>, Box<Desc>),
        Struct(Vec<(usize, isize, Desc)>),
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
        fn int(&mut self, lo: i64, hi: i64) -> isize {
            (lo + self.next((hi - lo + 1) as u64) as i64) as isize
        }
    }

    fn gen(r: &mut Rng, depth: u32) -> Desc {
        if depth == 0 || r.next(4) == 0 {
            return Desc::Base(r.next(5) as u8);
        }
        match r.next(3) {
            0 => Desc::Hvector(
                r.next(5) as usize,
                r.next(4) as usize,
                r.int(-40, 40),
                Box::new(gen(r, depth - 1)),
            ),
            1 => Desc::Hindexed(
                (0..r.next(4))
                    .map(|_| (r.next(3) as usize, r.int(-24, 48)))
                    .collect(),
                Box::new(gen(r, depth - 1)),
            ),
            _ => Desc::Struct(
                (0..1 + r.next(3))
                    .map(|_| (r.next(3) as usize, r.int(-16, 64), gen(r, depth - 1)))
                    .collect(),
            ),
        }
    }

    fn base(k: u8) -> Datatype {
        let int = int();
        match k {
            0 => int,
            1 => Datatype::basic(BasicType::F64),
            2 => Datatype::basic(BasicType::ShortInt),
            3 => UserDatatype::resized(&int, 0, 8).unwrap().into(),
            _ => UserDatatype::resized(&int, -4, 12).unwrap().into(),
        }
    }

    fn build(d: &Desc) -> Datatype {
        match d {
            Desc::Base(k) => base(*k),
            Desc::Hvector(n, bl, st, t) => {
                UserDatatype::heterogeneous_vector(*n, *bl, *st, &build(t))
                    .unwrap()
                    .into()
            }
            Desc::Hindexed(parts, t) => {
                let (bl, ds): (Vec<usize>, Vec<isize>) = parts.iter().copied().unzip();
                UserDatatype::heterogeneous_indexed(&bl, &ds, &build(t))
                    .unwrap()
                    .into()
            }
            Desc::Struct(parts) => {
                let bl: Vec<usize> = parts.iter().map(|p| p.0).collect();
                let ds: Vec<isize> = parts.iter().map(|p| p.1).collect();
                let ts: Vec<Datatype> = parts.iter().map(|p| build(&p.2)).collect();
                UserDatatype::structured(&bl, &ds, &ts).unwrap().into()
            }
        }
    }

    /// The flat list of blocks, built block by block with merging.
    fn flat(d: &Desc) -> Vec<Block> {
        fn push(v: &mut Vec<Block>, off: isize, len: usize) {
            if len == 0 {
                return;
            }
            if let Some(last) = v.last_mut() {
                if last.0 + last.1 as isize == off {
                    last.1 += len;
                    return;
                }
            }
            v.push((off, len));
        }
        fn copies(v: &mut Vec<Block>, disp: isize, n: usize, t: &Desc) {
            let (blocks, ext) = (flat(t), build(t).extent());
            for i in 0..n as isize {
                for &(off, len) in &blocks {
                    push(v, disp + i * ext + off, len);
                }
            }
        }
        let mut v = Vec::new();
        match d {
            Desc::Base(k) => return base(*k).blocks().to_vec(),
            Desc::Hvector(n, bl, st, t) => {
                for i in 0..*n as isize {
                    copies(&mut v, i * st, *bl, t);
                }
            }
            Desc::Hindexed(parts, t) => {
                for &(bl, d) in parts {
                    copies(&mut v, d, bl, t);
                }
            }
            Desc::Struct(parts) => {
                for (bl, d, t) in parts {
                    copies(&mut v, *d, *bl, t);
                }
            }
        }
        v
    }

    #[test]
    fn runs_list_the_blocks_a_flat_map_would() {
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        let mut compressed = 0;
        for _ in 0..1000 {
            let d = gen(&mut r, 3);
            let t = build(&d);
            let want = flat(&d);
            compressed += usize::from(t.runs().len() < t.block_count());
            assert_eq!(t.blocks(), &want[..], "{d:?}");
            assert_eq!(t.block_count(), want.len(), "{d:?}");
            assert_eq!(t.size(), want.iter().map(|b| b.1).sum::<usize>(), "{d:?}");
            // Packing walks the runs: the same bytes as the listed blocks.
            let count = 3;
            let Some((lo, hi)) = t.reach(count).unwrap() else {
                continue;
            };
            let mem: Vec<u8> = (0..(hi - lo) as usize).map(|i| (i * 7 + 1) as u8).collect();
            // The elements' origin sits `-lo` bytes into `mem` (before it
            // when the type starts past its origin: a wrapping offset, the
            // engine only adds the blocks' offsets back).
            let origin = -lo;
            let mut out = vec![0u8; t.packed_size(count).unwrap()];
            // SAFETY: `mem` holds every byte the elements reach, from the
            // origin at `origin`.
            unsafe { t.pack_raw(mem.as_ptr().wrapping_offset(origin), count, &mut out) }.unwrap();
            let mut expect = Vec::new();
            for i in 0..count as isize {
                for &(off, len) in t.blocks() {
                    let at = (origin + i * t.extent() + off) as usize;
                    expect.extend_from_slice(&mem[at..at + len]);
                }
            }
            assert_eq!(out, expect, "{d:?}");
            // Unpacking a prefix writes the same bytes back.
            let mut back = vec![0u8; mem.len()];
            let part = out.len() * 2 / 3;
            // SAFETY: as above, for writing.
            unsafe {
                t.unpack_raw(
                    &out[..part],
                    back.as_mut_ptr().wrapping_offset(origin),
                    count,
                )
            }
            .unwrap();
            let mut again = vec![0u8; out.len()];
            // SAFETY: as above.
            unsafe { t.pack_raw(back.as_ptr().wrapping_offset(origin), count, &mut again) }
                .unwrap();
            assert_eq!(again[..part], out[..part], "{d:?}");
        }
        // Enough of them are runs of several blocks to exercise the runs.
        assert!(compressed > 100, "{compressed}");
    }

    #[test]
    fn vectors_are_one_run_whatever_their_count() {
        let v = UserDatatype::vector(MAX_BLOCKS, 1, 2, &int()).unwrap();
        assert_eq!((v.block_count(), v.runs().len()), (MAX_BLOCKS, 1));
        let dbl = Datatype::basic(BasicType::F64);
        let h = UserDatatype::heterogeneous_vector(1 << 20, 3, -64, &dbl).unwrap();
        assert_eq!((h.block_count(), h.runs().len()), (1 << 20, 1));
        // A vector of a vector whose blocks continue its stride.
        let inner = UserDatatype::vector(4, 1, 2, &int()).unwrap();
        let r = UserDatatype::resized(&inner, 0, 32).unwrap();
        let outer = UserDatatype::contiguous(1 << 20, &r).unwrap();
        assert_eq!((outer.block_count(), outer.runs().len()), (1 << 22, 1));
        // A 2-d subarray is one run.
        let s = UserDatatype::subarray(
            &[1 << 12, 1 << 12],
            &[1 << 11, 8],
            &[5, 9],
            Order::C,
            &int(),
        )
        .unwrap();
        assert_eq!((s.block_count(), s.runs().len()), (1 << 11, 1));
    }

    #[test]
    fn resized_dup_and_subarray() {
        let r = UserDatatype::resized(&int(), -4, 16).unwrap();
        assert_eq!(
            (r.lower_bound(), r.extent(), r.true_lower_bound()),
            (-4, 16, 0)
        );
        assert_eq!(r.predefined(), None);
        assert_eq!(r.basic_type(), Some(BasicType::I32));
        let d = UserDatatype::dup(&r);
        assert_eq!(
            (d.lower_bound(), d.extent(), d.blocks()),
            (-4, 16, r.blocks())
        );
        // A 2x2 block at (1, 2) of a 4x5 array of ints, C order.
        let s = UserDatatype::subarray(&[4, 5], &[2, 2], &[1, 2], Order::C, &int()).unwrap();
        assert_eq!(s.blocks(), &[(28, 8), (48, 8)]);
        assert_eq!((s.lower_bound(), s.extent(), s.size()), (0, 80, 16));
        assert_eq!((s.true_lower_bound(), s.true_upper_bound()), (28, 56));
        // The same in Fortran order: dimension 0 varies fastest.
        let f = UserDatatype::subarray(&[5, 4], &[2, 2], &[2, 1], Order::Fortran, &int()).unwrap();
        assert_eq!(f.blocks(), s.blocks());
        assert_eq!(f.extent(), 80);
        // Three dimensions.
        let t =
            UserDatatype::subarray(&[2, 3, 4], &[1, 2, 1], &[1, 1, 3], Order::C, &int()).unwrap();
        let base = (12 + 4 + 3) * 4;
        assert_eq!(t.blocks(), &[(base, 4), (base + 16, 4)]);
        assert_eq!(t.extent(), 96);
        for bad in [
            UserDatatype::subarray(&[4], &[5], &[0], Order::C, &int()),
            UserDatatype::subarray(&[4], &[2], &[3], Order::C, &int()),
            UserDatatype::subarray(&[4], &[0], &[0], Order::C, &int()),
            UserDatatype::subarray(&[], &[], &[], Order::C, &int()),
        ] {
            assert!(matches!(bad, Err(Error::Arg { .. })));
        }
    }
}
