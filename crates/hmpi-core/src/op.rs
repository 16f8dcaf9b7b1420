//! Reduction operations: MPI's predefined operations
//! ([`SystemOperation`], rsmpi's constructors `sum()`, `max()`, … plus
//! `MAXLOC`, `MINLOC`, `REPLACE` and `NO_OP`), user operations
//! ([`UserOperation`]) and their local application, [`reduce_local`]
//! (`MPI_Reduce_local`: `inout[i] = input[i] op inout[i]`), which the
//! collectives and the C library use.
//!
//! A predefined operation applies element by element to the basic type of
//! the datatype: a predefined type, or a derived type whose basic elements
//! are all of one predefined type. Which basic types each operation takes
//! is MPI's table:
//!
//! | operation | basic types |
//! |---|---|
//! | `sum`, `product` | integers, floats, complex |
//! | `max`, `min` | integers, floats |
//! | `logical_and`, `logical_or`, `logical_xor` | integers, C `bool`, Fortran logicals |
//! | `bitwise_and`, `bitwise_or`, `bitwise_xor` | integers, bytes |
//! | `max_loc`, `min_loc` | the value-index pairs (`MPI_2INT`, `MPI_DOUBLE_INT`, …) |
//! | `replace`, `no_op` | any type |
//!
//! `MPI_CHAR` is one of the integers (signed, 8 bits), as the MPI
//! libraries programs run with treat it, though MPI lists it as a
//! character only. Any other pair is [`Error::Op`]. Integer arithmetic wraps; `max`/`min`
//! of floats ignore a NaN operand (Rust's `f64::max`); `max_loc`/`min_loc`
//! keep the smaller index on equal values. Results depend only on the
//! operands: they are deterministic. The types with no Rust arithmetic
//! (`long double`, half and quadruple precision and their complexes) are
//! refused with [`Error::Op`] by every operation but `replace` and
//! `no_op`.
//!
//! ```
//! use hmpi_core::op::{reduce_local_into, Operation, SystemOperation, UserOperation};
//!
//! let mut acc = [1i32, 5, -3];
//! reduce_local_into(&[4, 2, 7], &mut acc, &SystemOperation::max().into()).unwrap();
//! assert_eq!(acc, [4, 5, 7]);
//!
//! let first = Operation::from(UserOperation::typed(false, |x: &[u64], acc: &mut [u64]| {
//!     for (a, x) in acc.iter_mut().zip(x) {
//!         *a = 10 * *x + *a;
//!     }
//! }));
//! let mut acc = [2u64, 3];
//! reduce_local_into(&[1, 1], &mut acc, &first).unwrap();
//! assert_eq!(acc, [12, 13]);
//! ```

use crate::datatype::{bytes_of, bytes_of_mut, zeroed_vec, BasicType, Buffer, BufferMut};
use crate::datatype::{Datatype, Equivalence};
use crate::{Error, Result};
use std::fmt;
use std::sync::Arc;

/// A predefined reduction operation (rsmpi's `SystemOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SystemOperation {
    /// `MPI_SUM`.
    Sum,
    /// `MPI_PROD`.
    Product,
    /// `MPI_MAX`.
    Max,
    /// `MPI_MIN`.
    Min,
    /// `MPI_LAND`.
    LogicalAnd,
    /// `MPI_LOR`.
    LogicalOr,
    /// `MPI_LXOR`.
    LogicalXor,
    /// `MPI_BAND`.
    BitwiseAnd,
    /// `MPI_BOR`.
    BitwiseOr,
    /// `MPI_BXOR`.
    BitwiseXor,
    /// `MPI_MAXLOC`: the larger value and its index (the smaller index on
    /// equal values).
    MaxLoc,
    /// `MPI_MINLOC`: the smaller value and its index (the smaller index on
    /// equal values).
    MinLoc,
    /// `MPI_REPLACE`: the result is the input.
    Replace,
    /// `MPI_NO_OP`: the result is the accumulator, unchanged.
    NoOp,
}

impl SystemOperation {
    /// `MPI_SUM`.
    pub const fn sum() -> Self {
        Self::Sum
    }
    /// `MPI_PROD`.
    pub const fn product() -> Self {
        Self::Product
    }
    /// `MPI_MAX`.
    pub const fn max() -> Self {
        Self::Max
    }
    /// `MPI_MIN`.
    pub const fn min() -> Self {
        Self::Min
    }
    /// `MPI_LAND`.
    pub const fn logical_and() -> Self {
        Self::LogicalAnd
    }
    /// `MPI_LOR`.
    pub const fn logical_or() -> Self {
        Self::LogicalOr
    }
    /// `MPI_LXOR`.
    pub const fn logical_xor() -> Self {
        Self::LogicalXor
    }
    /// `MPI_BAND`.
    pub const fn bitwise_and() -> Self {
        Self::BitwiseAnd
    }
    /// `MPI_BOR`.
    pub const fn bitwise_or() -> Self {
        Self::BitwiseOr
    }
    /// `MPI_BXOR`.
    pub const fn bitwise_xor() -> Self {
        Self::BitwiseXor
    }
    /// `MPI_MAXLOC`.
    pub const fn max_loc() -> Self {
        Self::MaxLoc
    }
    /// `MPI_MINLOC`.
    pub const fn min_loc() -> Self {
        Self::MinLoc
    }
    /// `MPI_REPLACE`.
    pub const fn replace() -> Self {
        Self::Replace
    }
    /// `MPI_NO_OP`.
    pub const fn no_op() -> Self {
        Self::NoOp
    }

    /// Every predefined operation.
    pub const ALL: &'static [SystemOperation] = &[
        Self::Sum,
        Self::Product,
        Self::Max,
        Self::Min,
        Self::LogicalAnd,
        Self::LogicalOr,
        Self::LogicalXor,
        Self::BitwiseAnd,
        Self::BitwiseOr,
        Self::BitwiseXor,
        Self::MaxLoc,
        Self::MinLoc,
        Self::Replace,
        Self::NoOp,
    ];

    /// MPI's name (`MPI_SUM`, …).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Sum => "MPI_SUM",
            Self::Product => "MPI_PROD",
            Self::Max => "MPI_MAX",
            Self::Min => "MPI_MIN",
            Self::LogicalAnd => "MPI_LAND",
            Self::LogicalOr => "MPI_LOR",
            Self::LogicalXor => "MPI_LXOR",
            Self::BitwiseAnd => "MPI_BAND",
            Self::BitwiseOr => "MPI_BOR",
            Self::BitwiseXor => "MPI_BXOR",
            Self::MaxLoc => "MPI_MAXLOC",
            Self::MinLoc => "MPI_MINLOC",
            Self::Replace => "MPI_REPLACE",
            Self::NoOp => "MPI_NO_OP",
        }
    }

    /// Whether MPI defines this operation on elements of `b` (see the
    /// module's table).
    pub fn applies_to(self, b: BasicType) -> bool {
        use BasicType::*;
        // `MPI_CHAR` counts as a signed 8-bit integer, as in the MPI
        // libraries programs are run with (OSU's accumulate benchmarks sum
        // `MPI_CHAR`s).
        let int = matches!(
            b,
            I8 | U8 | I16 | U16 | I32 | U32 | I64 | U64 | I128 | U128 | Char
        );
        let float = matches!(b, F16 | F32 | F64 | LongDouble | F128);
        let complex = matches!(
            b,
            ComplexF16 | ComplexF32 | ComplexF64 | ComplexLongDouble | ComplexF128
        );
        let logical = matches!(
            b,
            Bool | Logical1 | Logical2 | Logical4 | Logical8 | Logical16
        );
        let pair = matches!(
            b,
            FloatInt | DoubleInt | LongInt | TwoInt | ShortInt | LongDoubleInt | TwoF32 | TwoF64
        );
        match self {
            Self::Sum | Self::Product => int || float || complex,
            Self::Max | Self::Min => int || float,
            Self::LogicalAnd | Self::LogicalOr | Self::LogicalXor => int || logical,
            Self::BitwiseAnd | Self::BitwiseOr | Self::BitwiseXor => int || b == Byte,
            Self::MaxLoc | Self::MinLoc => pair,
            Self::Replace | Self::NoOp => true,
        }
    }

    /// The element type this operation (other than `REPLACE` and `NO_OP`)
    /// computes on for `datatype`, or why it cannot: [`Error::Op`] for a
    /// mixed datatype, a type MPI does not define the operation on, or one
    /// without Rust arithmetic. `None` for a datatype without data.
    pub fn element_type(self, datatype: &Datatype) -> Result<Option<BasicType>> {
        let b = match datatype.basic_type() {
            Some(b) => b,
            None if datatype.size() == 0 => return Ok(None),
            None => {
                return Err(Error::Op {
                    reason: format!(
                        "{} needs a datatype whose elements are of one predefined type; this \
                         one mixes several",
                        self.name()
                    ),
                })
            }
        };
        if !self.applies_to(b) {
            return Err(Error::Op {
                reason: format!("{} is not defined for elements of type {b:?}", self.name()),
            });
        }
        if !computable(b) {
            return Err(Error::Op {
                reason: format!(
                    "{} on elements of type {b:?} is not supported (no arithmetic for them)",
                    self.name()
                ),
            });
        }
        Ok(Some(b))
    }

    /// Every predefined operation is commutative.
    pub const fn is_commutative(self) -> bool {
        true
    }
}

/// A user function over packed bytes.
type PackedFn = dyn Fn(&[u8], &mut [u8], &Datatype) -> Result<()> + Send + Sync;
/// A user function over the elements in place.
type RawFn = dyn Fn(*const u8, *mut u8, usize, &Datatype) + Send + Sync;

#[derive(Clone)]
enum UserFn {
    Packed(Arc<PackedFn>),
    Raw(Arc<RawFn>),
}

/// A user reduction operation (rsmpi's `UserOperation`): a function or
/// closure that folds `input` into `inout`, commutative or not. Cheap to
/// clone (shared), `Send + Sync`.
#[derive(Clone)]
pub struct UserOperation {
    f: UserFn,
    commutative: bool,
}

impl fmt::Debug for UserOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserOperation")
            .field("commutative", &self.commutative)
            .finish_non_exhaustive()
    }
}

impl UserOperation {
    fn packed(
        commutative: bool,
        f: impl Fn(&[u8], &mut [u8], &Datatype) -> Result<()> + Send + Sync + 'static,
    ) -> Self {
        UserOperation {
            f: UserFn::Packed(Arc::new(f)),
            commutative,
        }
    }

    /// A commutative operation over bytes: `f(input, inout, datatype)`
    /// gets the packed data of the elements (what
    /// [`Datatype::pack`] makes of them) and updates `inout`.
    pub fn commutative(f: impl Fn(&[u8], &mut [u8], &Datatype) + Send + Sync + 'static) -> Self {
        Self::packed(true, move |a, o, t| {
            f(a, o, t);
            Ok(())
        })
    }

    /// A non-commutative operation over bytes (see
    /// [`UserOperation::commutative`]); `inout = input op inout`, in this
    /// order.
    pub fn non_commutative(
        f: impl Fn(&[u8], &mut [u8], &Datatype) + Send + Sync + 'static,
    ) -> Self {
        Self::packed(false, move |a, o, t| {
            f(a, o, t);
            Ok(())
        })
    }

    /// An operation over values of `T`: `f(input, inout)`. The data of the
    /// datatype it is applied with must be a whole number of `T`s
    /// ([`Error::Op`] otherwise).
    pub fn typed<T: Equivalence>(
        commutative: bool,
        f: impl Fn(&[T], &mut [T]) + Send + Sync + 'static,
    ) -> Self {
        Self::packed(commutative, move |a, o, _| {
            let n = std::mem::size_of::<T>();
            if n == 0 {
                f(&[], &mut []);
                return Ok(());
            }
            if a.len() % n != 0 || a.len() != o.len() {
                return Err(Error::Op {
                    reason: format!(
                        "an operation on {} applied to {} bytes of data",
                        std::any::type_name::<T>(),
                        a.len()
                    ),
                });
            }
            let k = a.len() / n;
            let mut x: Vec<T> = zeroed_vec(k);
            bytes_of_mut(&mut x).copy_from_slice(a);
            let mut y: Vec<T> = zeroed_vec(k);
            bytes_of_mut(&mut y).copy_from_slice(o);
            f(&x, &mut y);
            o.copy_from_slice(bytes_of(&y));
            Ok(())
        })
    }

    /// An operation on the elements where they are (MPI's user functions:
    /// `f(input, inout, count, datatype)` with the buffers' own pointers,
    /// in the datatype's layout).
    ///
    /// # Safety
    /// `f` must only read the type map of `count` elements at `input` and
    /// write that of `inout` (what the caller of [`reduce_local_raw`]
    /// guarantees to be there).
    pub unsafe fn from_raw(
        commutative: bool,
        f: impl Fn(*const u8, *mut u8, usize, &Datatype) + Send + Sync + 'static,
    ) -> Self {
        UserOperation {
            f: UserFn::Raw(Arc::new(f)),
            commutative,
        }
    }

    /// Whether the operation was declared commutative.
    pub fn is_commutative(&self) -> bool {
        self.commutative
    }
}

/// A reduction operation: predefined or the user's.
#[derive(Clone, Debug)]
pub enum Operation {
    /// A predefined operation.
    System(SystemOperation),
    /// A user operation.
    User(UserOperation),
}

impl Operation {
    /// Whether `a op b == b op a` may be assumed.
    pub fn is_commutative(&self) -> bool {
        match self {
            Operation::System(s) => s.is_commutative(),
            Operation::User(u) => u.is_commutative(),
        }
    }
}

impl From<SystemOperation> for Operation {
    fn from(s: SystemOperation) -> Self {
        Operation::System(s)
    }
}

impl From<UserOperation> for Operation {
    fn from(u: UserOperation) -> Self {
        Operation::User(u)
    }
}

/// `inout = input op inout` for `count` elements of `datatype` in each
/// buffer (element 0 at the start of each; the bytes of any
/// [`Buffer`]/[`BufferMut`], so a slice or `Vec` of `Equivalence` values).
/// [`Error::Buffer`] if a buffer does not hold what the elements reach,
/// [`Error::Op`] if the operation does not apply to the datatype.
pub fn reduce_local<I, O>(
    input: &I,
    inout: &mut O,
    count: usize,
    datatype: &Datatype,
    op: &Operation,
) -> Result<()>
where
    I: Buffer + ?Sized,
    O: BufferMut + ?Sized,
{
    let a = input.as_bytes();
    let o = inout.as_bytes_mut();
    datatype.check_reach(a.len(), count)?;
    datatype.check_reach(o.len(), count)?;
    // SAFETY: both buffers hold what `count` elements reach (checked
    // above), the input shared, the output borrowed exclusively (so they
    // do not overlap).
    unsafe { reduce_local_raw(a.as_ptr(), o.as_mut_ptr(), count, datatype, op) }
}

/// `inout[i] = input[i] op inout[i]` for slices of equal length (rsmpi's
/// `reduce_local_into`), with `T`'s [`Equivalence::equivalent_datatype`].
pub fn reduce_local_into<T: Equivalence>(
    input: &[T],
    inout: &mut [T],
    op: &Operation,
) -> Result<()> {
    if input.len() != inout.len() {
        return Err(Error::Buffer {
            reason: format!(
                "reduce_local_into: {} input elements for {} in the accumulator",
                input.len(),
                inout.len()
            ),
        });
    }
    let n = input.len();
    reduce_local(input, inout, n, &T::equivalent_datatype(), op)
}

/// [`reduce_local`] on raw pointers (for the C library).
///
/// # Safety
/// The type map of `count` elements of `datatype` is readable at `input`
/// and readable and writable at `inout`, and the two do not overlap (for
/// a dense type an overlap is refused with [`Error::Buffer`]).
pub unsafe fn reduce_local_raw(
    input: *const u8,
    inout: *mut u8,
    count: usize,
    datatype: &Datatype,
    op: &Operation,
) -> Result<()> {
    let bytes = datatype.packed_size(count)?;
    let s = match op {
        Operation::User(u) => {
            return match &u.f {
                UserFn::Raw(f) => {
                    if count > 0 {
                        f(input, inout, count, datatype);
                    }
                    Ok(())
                }
                // SAFETY: the caller's guarantee.
                UserFn::Packed(f) => unsafe {
                    on_data(input, inout, count, bytes, datatype, |a, o| {
                        f(a, o, datatype)
                    })
                },
            };
        }
        Operation::System(s) => *s,
    };
    match s {
        SystemOperation::NoOp => return Ok(()),
        SystemOperation::Replace => {
            // SAFETY: the caller's guarantee.
            return unsafe {
                on_data(input, inout, count, bytes, datatype, |a, o| {
                    o.copy_from_slice(a);
                    Ok(())
                })
            };
        }
        _ => {}
    }
    let Some(b) = s.element_type(datatype)? else {
        return Ok(());
    };
    // SAFETY: the caller's guarantee.
    unsafe {
        on_data(input, inout, count, bytes, datatype, |a, o| {
            apply(s, b, a, o);
            Ok(())
        })
    }
}

/// Calls `f(input data, inout data)` on the packed data of `count`
/// elements (`bytes` bytes): in place for a dense type, else packed into
/// temporaries and the result unpacked into `inout`.
///
/// # Safety
/// As for [`reduce_local_raw`].
unsafe fn on_data(
    input: *const u8,
    inout: *mut u8,
    count: usize,
    bytes: usize,
    datatype: &Datatype,
    f: impl FnOnce(&[u8], &mut [u8]) -> Result<()>,
) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    if let Some(off) = datatype.dense_offset() {
        let (a, o) = (
            input.wrapping_offset(off) as usize,
            inout.wrapping_offset(off) as usize,
        );
        if a < o.wrapping_add(bytes) && o < a.wrapping_add(bytes) {
            // Erroneous in MPI too; refused here rather than aliased.
            return Err(Error::Buffer {
                reason: "the input and the accumulator overlap".into(),
            });
        }
        // SAFETY: a dense type's `count` elements are the `bytes` bytes
        // from `off` (the caller's guarantee that they are there), and the
        // two runs do not overlap (checked above).
        let (a, o) = unsafe {
            (
                std::slice::from_raw_parts(input.wrapping_offset(off), bytes),
                std::slice::from_raw_parts_mut(inout.wrapping_offset(off), bytes),
            )
        };
        return f(a, o);
    }
    let mut a = vec![0u8; bytes];
    let mut o = vec![0u8; bytes];
    // SAFETY: the caller's guarantee: the elements are at `input` and
    // `inout`; the temporaries are `bytes` long.
    unsafe {
        datatype.pack_raw(input, count, &mut a)?;
        datatype.pack_raw(inout, count, &mut o)?;
    }
    f(&a, &mut o)?;
    // SAFETY: as above, for writing.
    unsafe { datatype.unpack_raw(&o, inout, count) }?;
    Ok(())
}

/// Whether Rust has arithmetic for `b`.
fn computable(b: BasicType) -> bool {
    use BasicType::*;
    !matches!(
        b,
        F16 | LongDouble | F128 | ComplexF16 | ComplexLongDouble | ComplexF128 | LongDoubleInt
    )
}

/// A number read from and written to native-endian bytes.
trait Num: Copy + PartialOrd {
    const N: usize;
    fn get(b: &[u8]) -> Self;
    fn put(self, b: &mut [u8]);
}

macro_rules! num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const N: usize = std::mem::size_of::<$t>();
            #[inline]
            fn get(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::N]);
                <$t>::from_ne_bytes(a)
            }
            #[inline]
            fn put(self, b: &mut [u8]) {
                b[..Self::N].copy_from_slice(&self.to_ne_bytes());
            }
        }
    )*};
}

num!(i8, u8, i16, u16, i32, u32, i64, u64, i128, u128, f32, f64);

/// `o[i] = f(a[i], o[i])` over elements of `T`.
#[inline]
fn zip<T: Num>(a: &[u8], o: &mut [u8], f: impl Fn(T, T) -> T) {
    for (x, y) in a.chunks_exact(T::N).zip(o.chunks_exact_mut(T::N)) {
        f(T::get(x), T::get(y)).put(y);
    }
}

macro_rules! integer {
    ($t:ty, $s:expr, $a:expr, $o:expr) => {
        match $s {
            SystemOperation::Sum => zip::<$t>($a, $o, |x, y| x.wrapping_add(y)),
            SystemOperation::Product => zip::<$t>($a, $o, |x, y| x.wrapping_mul(y)),
            SystemOperation::Max => zip::<$t>($a, $o, |x, y| x.max(y)),
            SystemOperation::Min => zip::<$t>($a, $o, |x, y| x.min(y)),
            SystemOperation::LogicalAnd => zip::<$t>($a, $o, |x, y| <$t>::from(x != 0 && y != 0)),
            SystemOperation::LogicalOr => zip::<$t>($a, $o, |x, y| <$t>::from(x != 0 || y != 0)),
            SystemOperation::LogicalXor => {
                zip::<$t>($a, $o, |x, y| <$t>::from((x != 0) != (y != 0)))
            }
            SystemOperation::BitwiseAnd => zip::<$t>($a, $o, |x, y| x & y),
            SystemOperation::BitwiseOr => zip::<$t>($a, $o, |x, y| x | y),
            SystemOperation::BitwiseXor => zip::<$t>($a, $o, |x, y| x ^ y),
            _ => {}
        }
    };
}

macro_rules! float {
    ($t:ty, $s:expr, $a:expr, $o:expr) => {
        match $s {
            SystemOperation::Sum => zip::<$t>($a, $o, |x, y| x + y),
            SystemOperation::Product => zip::<$t>($a, $o, |x, y| x * y),
            SystemOperation::Max => zip::<$t>($a, $o, |x, y| x.max(y)),
            SystemOperation::Min => zip::<$t>($a, $o, |x, y| x.min(y)),
            _ => {}
        }
    };
}

macro_rules! complex {
    ($t:ty, $s:expr, $a:expr, $o:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        for (x, y) in $a.chunks_exact(2 * N).zip($o.chunks_exact_mut(2 * N)) {
            let (xr, xi) = (<$t>::get(x), <$t>::get(&x[N..]));
            let (yr, yi) = (<$t>::get(y), <$t>::get(&y[N..]));
            let (r, i) = match $s {
                SystemOperation::Sum => (xr + yr, xi + yi),
                SystemOperation::Product => (xr * yr - xi * yi, xr * yi + xi * yr),
                _ => (yr, yi),
            };
            r.put(y);
            i.put(&mut y[N..]);
        }
    }};
}

/// `MAXLOC` / `MINLOC` over packed `(value V, index I)` pairs.
fn loc<V: Num, I: Num>(max: bool, a: &[u8], o: &mut [u8]) {
    let n = V::N + I::N;
    for (x, y) in a.chunks_exact(n).zip(o.chunks_exact_mut(n)) {
        let (xv, xi) = (V::get(x), I::get(&x[V::N..]));
        let (yv, yi) = (V::get(y), I::get(&y[V::N..]));
        if xv == yv {
            if xi < yi {
                xi.put(&mut y[V::N..]);
            }
        } else if (max && xv > yv) || (!max && xv < yv) {
            xv.put(y);
            xi.put(&mut y[V::N..]);
        }
    }
}

/// Applies `s` to packed elements of `b` (checked to apply and to be
/// computable).
fn apply(s: SystemOperation, b: BasicType, a: &[u8], o: &mut [u8]) {
    use BasicType::*;
    let max = s == SystemOperation::MaxLoc;
    match b {
        I8 | Char => integer!(i8, s, a, o),
        U8 | Byte | Bool | Logical1 => integer!(u8, s, a, o),
        I16 => integer!(i16, s, a, o),
        U16 | Logical2 => integer!(u16, s, a, o),
        I32 => integer!(i32, s, a, o),
        U32 | Logical4 => integer!(u32, s, a, o),
        I64 => integer!(i64, s, a, o),
        U64 | Logical8 => integer!(u64, s, a, o),
        I128 => integer!(i128, s, a, o),
        U128 | Logical16 => integer!(u128, s, a, o),
        F32 => float!(f32, s, a, o),
        F64 => float!(f64, s, a, o),
        ComplexF32 => complex!(f32, s, a, o),
        ComplexF64 => complex!(f64, s, a, o),
        FloatInt => loc::<f32, i32>(max, a, o),
        DoubleInt => loc::<f64, i32>(max, a, o),
        LongInt => loc::<i64, i32>(max, a, o),
        TwoInt => loc::<i32, i32>(max, a, o),
        ShortInt => loc::<i16, i32>(max, a, o),
        TwoF32 => loc::<f32, f32>(max, a, o),
        TwoF64 => loc::<f64, f64>(max, a, o),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::UserDatatype;

    fn sys(s: SystemOperation) -> Operation {
        s.into()
    }

    #[test]
    fn integer_ops() {
        let cases: [(SystemOperation, [i32; 4]); 10] = [
            (SystemOperation::sum(), [7, -1, i32::MIN, 0]),
            (SystemOperation::product(), [12, -2, i32::MAX, 0]),
            (SystemOperation::max(), [4, 1, i32::MAX, 0]),
            (SystemOperation::min(), [3, -2, 1, 0]),
            (SystemOperation::logical_and(), [1, 1, 1, 0]),
            (SystemOperation::logical_or(), [1, 1, 1, 0]),
            (SystemOperation::logical_xor(), [0, 0, 0, 0]),
            (SystemOperation::bitwise_and(), [0, 0, 1, 0]),
            (SystemOperation::bitwise_or(), [7, -1, i32::MAX, 0]),
            (SystemOperation::bitwise_xor(), [7, -1, i32::MAX - 1, 0]),
        ];
        for (s, want) in cases {
            let mut acc = [4, -2, i32::MAX, 0];
            reduce_local_into(&[3, 1, 1, 0], &mut acc, &sys(s)).unwrap();
            assert_eq!(acc, want, "{s:?}");
        }
        let mut acc = [200u8, 1];
        reduce_local_into(&[100u8, 2], &mut acc, &sys(SystemOperation::Sum)).unwrap();
        assert_eq!(acc, [44, 3]);
        let mut acc = [u64::MAX, 5];
        reduce_local_into(&[1u64, 9], &mut acc, &sys(SystemOperation::Min)).unwrap();
        assert_eq!(acc, [1, 5]);
    }

    #[test]
    fn float_and_complex_ops() {
        let mut acc = [1.5f64, -2.0, 8.0];
        reduce_local_into(&[2.0, 3.0, f64::NAN], &mut acc, &sys(SystemOperation::Max)).unwrap();
        assert_eq!(acc, [2.0, 3.0, 8.0]);
        reduce_local_into(&[2.0, 3.0, 0.5], &mut acc, &sys(SystemOperation::Product)).unwrap();
        assert_eq!(acc, [4.0, 9.0, 4.0]);
        let c = Datatype::basic(BasicType::ComplexF32);
        let x = [1.0f32, 2.0]; // 1 + 2i
        let mut y = [3.0f32, -1.0]; // 3 - i
        reduce_local(&x, &mut y, 1, &c, &sys(SystemOperation::Product)).unwrap();
        assert_eq!(y, [5.0, 5.0]);
        reduce_local(&x, &mut y, 1, &c, &sys(SystemOperation::Sum)).unwrap();
        assert_eq!(y, [6.0, 7.0]);
        assert!(matches!(
            reduce_local(&x, &mut y, 1, &c, &sys(SystemOperation::Max)),
            Err(Error::Op { .. })
        ));
    }

    #[test]
    fn loc_ops_on_padded_pairs() {
        // MPI_DOUBLE_INT: 12 bytes of data in 16.
        let di = Datatype::basic(BasicType::DoubleInt);
        #[derive(Clone, Copy)]
        #[repr(C)]
        struct Pair {
            v: f64,
            i: i32,
            _pad: i32,
        }
        let mk = |v, i| Pair { v, i, _pad: -7 };
        let input = [mk(1.0, 3), mk(5.0, 2), mk(2.0, 9)];
        let mut acc = [mk(1.0, 1), mk(4.0, 0), mk(2.0, 4)];
        let bytes = |p: &[Pair]| -> Vec<u8> {
            p.iter()
                .flat_map(|q| {
                    let mut b = q.v.to_ne_bytes().to_vec();
                    b.extend(q.i.to_ne_bytes());
                    b.extend(q._pad.to_ne_bytes());
                    b
                })
                .collect()
        };
        let a = bytes(&input);
        let mut o = bytes(&acc);
        reduce_local(&a[..], &mut o[..], 3, &di, &sys(SystemOperation::MaxLoc)).unwrap();
        for (k, c) in o.chunks(16).enumerate() {
            acc[k] = Pair {
                v: f64::from_ne_bytes(c[..8].try_into().unwrap()),
                i: i32::from_ne_bytes(c[8..12].try_into().unwrap()),
                _pad: i32::from_ne_bytes(c[12..].try_into().unwrap()),
            };
        }
        let got: Vec<(f64, i32, i32)> = acc.iter().map(|p| (p.v, p.i, p._pad)).collect();
        assert_eq!(got, vec![(1.0, 1, -7), (5.0, 2, -7), (2.0, 4, -7)]);
        // MINLOC on MPI_2INT and MPI_SHORT_INT.
        let ti = Datatype::basic(BasicType::TwoInt);
        let mut acc = [5i32, 0, 1, 7];
        reduce_local(
            &[3i32, 4, 1, 2],
            &mut acc,
            2,
            &ti,
            &sys(SystemOperation::MinLoc),
        )
        .unwrap();
        assert_eq!(acc, [3, 4, 1, 2]);
        let si = Datatype::basic(BasicType::ShortInt);
        let mut a = [0u8; 8];
        a[..2].copy_from_slice(&(-4i16).to_ne_bytes());
        a[4..].copy_from_slice(&6i32.to_ne_bytes());
        let mut o = [0u8; 8];
        o[..2].copy_from_slice(&2i16.to_ne_bytes());
        o[4..].copy_from_slice(&1i32.to_ne_bytes());
        reduce_local(&a, &mut o, 1, &si, &sys(SystemOperation::MinLoc)).unwrap();
        assert_eq!(o, a);
        assert!(matches!(
            reduce_local(&a, &mut o, 1, &si, &sys(SystemOperation::Sum)),
            Err(Error::Op { .. })
        ));
    }

    #[test]
    fn logical_byte_and_refused_types() {
        let b = Datatype::basic(BasicType::Bool);
        let mut acc = [1u8, 0, 1, 0];
        reduce_local(
            &[1u8, 1, 0, 0],
            &mut acc,
            4,
            &b,
            &sys(SystemOperation::LogicalXor),
        )
        .unwrap();
        assert_eq!(acc, [0, 1, 1, 0]);
        assert!(reduce_local(&[1u8], &mut [1u8], 1, &b, &sys(SystemOperation::Sum)).is_err());
        let l = Datatype::basic(BasicType::Logical4);
        let mut acc = [7u32, 0];
        reduce_local(
            &[2u32, 0],
            &mut acc,
            2,
            &l,
            &sys(SystemOperation::LogicalAnd),
        )
        .unwrap();
        assert_eq!(acc, [1, 0]);
        let byte = Datatype::basic(BasicType::Byte);
        let mut acc = [0xf0u8];
        reduce_local(
            &[0x3cu8],
            &mut acc,
            1,
            &byte,
            &sys(SystemOperation::BitwiseXor),
        )
        .unwrap();
        assert_eq!(acc, [0xcc]);
        assert!(reduce_local(&[1u8], &mut [1u8], 1, &byte, &sys(SystemOperation::Max)).is_err());
        // MPI_CHAR is a signed 8-bit integer; MPI_WCHAR is no number.
        let ch = Datatype::basic(BasicType::Char);
        let mut acc = [0xffu8];
        reduce_local(&[0x7fu8], &mut acc, 1, &ch, &sys(SystemOperation::Max)).unwrap();
        assert_eq!(acc, [0x7f]);
        reduce_local(&[2u8], &mut acc, 1, &ch, &sys(SystemOperation::Sum)).unwrap();
        assert_eq!(acc, [0x81]);
        let wch = Datatype::basic(BasicType::WChar);
        assert!(matches!(
            reduce_local(
                &[1u8; 4],
                &mut [1u8; 4],
                1,
                &wch,
                &sys(SystemOperation::Sum)
            ),
            Err(Error::Op { .. })
        ));
        let ld = Datatype::basic(BasicType::LongDouble);
        let mut acc = [0u8; 16];
        assert!(reduce_local(&[1u8; 16], &mut acc, 1, &ld, &sys(SystemOperation::Sum)).is_err());
        reduce_local(&[1u8; 16], &mut acc, 1, &ld, &sys(SystemOperation::Replace)).unwrap();
        assert_eq!(acc, [1u8; 16]);
        reduce_local(&[2u8; 16], &mut acc, 1, &ld, &sys(SystemOperation::NoOp)).unwrap();
        assert_eq!(acc, [1u8; 16]);
        // Every operation either applies or says why not, for every type.
        for &s in SystemOperation::ALL {
            for &bt in BasicType::ALL {
                let t = Datatype::basic(bt);
                let (x, mut y) = (
                    vec![1u8; t.extent() as usize],
                    vec![1u8; t.extent() as usize],
                );
                let r = reduce_local(&x[..], &mut y[..], 1, &t, &sys(s));
                let ok = s.applies_to(bt)
                    && (computable(bt)
                        || matches!(s, SystemOperation::Replace | SystemOperation::NoOp));
                assert_eq!(r.is_ok(), ok, "{s:?} on {bt:?}");
            }
        }
    }

    #[test]
    fn derived_types_of_one_basic_type() {
        let int = Datatype::basic(BasicType::I32);
        let v = UserDatatype::vector(2, 1, 2, &int).unwrap(); // ints 0 and 2
                                                              // Extent 3 ints: two elements are ints 0, 2, 3 and 5.
        let mut acc = [1i32; 8];
        reduce_local(
            &[5i32, 6, 7, 8, 9, 10, 11, 12],
            &mut acc,
            2,
            &v,
            &sys(SystemOperation::Sum),
        )
        .unwrap();
        assert_eq!(acc, [6, 1, 8, 9, 1, 11, 1, 1]);
        let mixed = UserDatatype::structured(
            &[1, 1],
            &[0, 8],
            &[int.clone(), Datatype::basic(BasicType::F64)],
        )
        .unwrap();
        let mut acc = [0u8; 16];
        assert!(matches!(
            reduce_local(&[0u8; 16], &mut acc, 1, &mixed, &sys(SystemOperation::Sum)),
            Err(Error::Op { .. })
        ));
        reduce_local(
            &[3u8; 16],
            &mut acc,
            1,
            &mixed,
            &sys(SystemOperation::Replace),
        )
        .unwrap();
        assert_eq!(&acc[..4], &[3; 4]);
        assert_eq!(&acc[4..8], &[0; 4]); // the gap is not written
                                         // Out-of-bounds buffers are errors, not reads.
        assert!(matches!(
            reduce_local(
                &[1i32; 3],
                &mut [1i32; 4],
                2,
                &v,
                &sys(SystemOperation::Sum)
            ),
            Err(Error::Buffer { .. })
        ));
    }

    #[test]
    fn overlapping_buffers_are_refused() {
        let mut v = [1i32, 2, 3];
        let p = v.as_mut_ptr().cast::<u8>();
        let int = Datatype::basic(BasicType::I32);
        // SAFETY: both runs of two ints are inside `v`.
        let r = unsafe { reduce_local_raw(p, p.add(4), 2, &int, &sys(SystemOperation::Sum)) };
        assert!(matches!(r, Err(Error::Buffer { .. })));
        assert_eq!(v, [1, 2, 3]);
    }

    #[test]
    fn user_operations() {
        // Non-commutative: inout = input op inout, in that order.
        let op: Operation = UserOperation::non_commutative(|a, o, _| {
            for (y, x) in o.iter_mut().zip(a) {
                *y = x.wrapping_mul(10).wrapping_add(*y);
            }
        })
        .into();
        assert!(!op.is_commutative());
        let mut acc = [2u8, 3];
        reduce_local_into(&[1u8, 4], &mut acc, &op).unwrap();
        assert_eq!(acc, [12, 43]);
        // Over a strided type the function sees the packed data only.
        let int = Datatype::basic(BasicType::I32);
        let v = UserDatatype::vector(2, 1, 2, &int).unwrap();
        let op: Operation = UserOperation::typed(true, |x: &[i32], y: &mut [i32]| {
            assert_eq!(x.len(), 2);
            for (b, a) in y.iter_mut().zip(x) {
                *b -= a;
            }
        })
        .into();
        let mut acc = [10i32, 0, 10, 0];
        reduce_local(&[1i32, 9, 2, 9], &mut acc, 1, &v, &op).unwrap();
        assert_eq!(acc, [9, 0, 8, 0]);
        // A typed operation on data that is not whole values of its type.
        let op: Operation = UserOperation::typed(true, |_: &[u64], _: &mut [u64]| {}).into();
        assert!(matches!(
            reduce_local_into(&[1u8; 3], &mut [0u8; 3], &op),
            Err(Error::Op { .. })
        ));
        // A raw operation sees the elements where they are.
        let max = |a: *const u8, o: *mut u8, n: usize, t: &Datatype| {
            assert_eq!(t.size(), 4);
            for k in 0..n {
                // SAFETY: `n` ints at each pointer (reduce_local's bounds
                // check).
                unsafe {
                    let x = a.cast::<i32>().add(k).read_unaligned();
                    let p = o.cast::<i32>().add(k);
                    p.write_unaligned(p.read_unaligned().max(x));
                }
            }
        };
        // SAFETY: the closure touches `n` dense i32 elements only.
        let raw = unsafe { UserOperation::from_raw(true, max) };
        let mut acc = [1i32, 8];
        reduce_local_into(&[4, 2], &mut acc, &raw.into()).unwrap();
        assert_eq!(acc, [4, 8]);
        assert!(matches!(
            reduce_local_into(&[1i32], &mut [1i32, 2], &sys(SystemOperation::Sum)),
            Err(Error::Buffer { .. })
        ));
    }
}
