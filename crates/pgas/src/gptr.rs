//! Global pointers: 128 bits that name one byte of the global address
//! space — a unit, a segment and an offset in that unit's part of the
//! segment ([`Gptr`], the layout a C layer shares), and the typed
//! [`GlobalPtr<T>`] with arithmetic in elements.

use crate::error::{arg, Result};
use crate::runtime::Pgas;
use std::fmt;
use std::marker::PhantomData;

/// A global pointer without a type: the 128-bit layout of DART.
///
/// | bits  | field     | meaning                                            |
/// |-------|-----------|----------------------------------------------------|
/// | 32    | `unit`    | the unit that holds the memory (absolute id)       |
/// | 16    | `segment` | 0: the unit's local pool; ≥ 1: a team allocation   |
/// | 16    | `flags`   | the index of the segment's team in the team table  |
/// | 64    | `offset`  | bytes from the start of the unit's part            |
///
/// Offsets are symmetric: in a team allocation, the same offset at two
/// units names the same object of each unit's part.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gptr {
    /// The unit that holds the memory (its id in the team of all units).
    pub unit: u32,
    /// The segment: 0 for the units' local pools, a team allocation's id
    /// otherwise.
    pub segment: u16,
    /// The index of the segment's team in the team table.
    pub flags: u16,
    /// Bytes from the start of the unit's part of the segment.
    pub offset: u64,
}

const _: () = assert!(std::mem::size_of::<Gptr>() == 16);

impl Gptr {
    /// The null global pointer (`DART_GPTR_NULL`): every field 0 and
    /// segment 0 offset 0 is never handed out by an allocation (the pool's
    /// first bytes are reserved for it).
    pub const NULL: Gptr = Gptr {
        unit: 0,
        segment: 0,
        flags: 0,
        offset: 0,
    };

    /// Whether this is [`Gptr::NULL`].
    pub fn is_null(&self) -> bool {
        *self == Gptr::NULL
    }

    /// The same offset of the same segment at unit `unit` (the symmetric
    /// counterpart, `dart_gptr_setunit`).
    pub fn at_unit(self, unit: u32) -> Gptr {
        Gptr { unit, ..self }
    }

    /// `bytes` further on (negative: back); an error when the offset would
    /// leave `0..=u64::MAX`.
    pub fn byte_offset(self, bytes: i64) -> Result<Gptr> {
        let offset = self.offset.checked_add_signed(bytes).ok_or_else(|| {
            arg(format!(
                "offset {} {bytes:+} bytes leaves the range of offsets",
                self.offset
            ))
        })?;
        Ok(Gptr { offset, ..self })
    }
}

impl fmt::Debug for Gptr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Gptr(unit {}, segment {}, team index {}, offset {:#x})",
            self.unit, self.segment, self.flags, self.offset
        )
    }
}

/// A global pointer to a `T`: a [`Gptr`] whose arithmetic counts elements.
///
/// Converting it to a local reference is checked by the context that knows
/// its segment ([`crate::Pgas::local_ptr`], [`GlobalPtr::as_ref`]).
#[repr(transparent)]
pub struct GlobalPtr<T> {
    raw: Gptr,
    _t: PhantomData<*mut T>,
}

impl<T> Clone for GlobalPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for GlobalPtr<T> {}
impl<T> PartialEq for GlobalPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}
impl<T> Eq for GlobalPtr<T> {}

// SAFETY: a global pointer is plain data (ids and an offset); it gives no
// access by itself, every access goes through the checked calls.
unsafe impl<T> Send for GlobalPtr<T> {}
// SAFETY: as for `Send`.
unsafe impl<T> Sync for GlobalPtr<T> {}

impl<T> fmt::Debug for GlobalPtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "GlobalPtr<{}>({:?})",
            std::any::type_name::<T>(),
            self.raw
        )
    }
}

impl<T> GlobalPtr<T> {
    /// A typed view of `raw`.
    pub fn from_raw(raw: Gptr) -> Self {
        GlobalPtr {
            raw,
            _t: PhantomData,
        }
    }

    /// The untyped pointer.
    pub fn raw(self) -> Gptr {
        self.raw
    }

    /// The unit that holds the element (absolute id).
    pub fn unit(self) -> u32 {
        self.raw.unit
    }

    /// The segment id.
    pub fn segment(self) -> u16 {
        self.raw.segment
    }

    /// The offset in bytes.
    pub fn byte_offset(self) -> u64 {
        self.raw.offset
    }

    /// The same element of the symmetric allocation at unit `unit`.
    pub fn at_unit(self, unit: u32) -> Self {
        Self::from_raw(self.raw.at_unit(unit))
    }

    /// A pointer to the same bytes as another type.
    pub fn cast<U>(self) -> GlobalPtr<U> {
        GlobalPtr::from_raw(self.raw)
    }

    /// `n` elements further on (`n` negative: back), in the same unit's
    /// part; an error if the offset would overflow. Whether the element
    /// exists is checked when it is accessed.
    pub fn offset(self, n: i64) -> Result<Self> {
        let size = std::mem::size_of::<T>() as i64;
        let bytes = n
            .checked_mul(size)
            .ok_or_else(|| arg(format!("{n} elements of {size} bytes overflow")))?;
        Ok(Self::from_raw(self.raw.byte_offset(bytes)?))
    }

    /// `n` elements further on (named after `<*const T>::add`; fallible,
    /// so not `std::ops::Add`).
    #[allow(clippy::should_implement_trait)]
    pub fn add(self, n: usize) -> Result<Self> {
        let n = i64::try_from(n).map_err(|_| arg(format!("{n} elements overflow")))?;
        self.offset(n)
    }

    /// Whether the element is this unit's (`me` is the calling unit's
    /// absolute id, [`crate::Pgas::myid`]).
    pub fn is_local_to(self, me: u32) -> bool {
        self.raw.unit == me
    }

    /// The distance from `origin` in elements, if both point into the same
    /// unit's part of one segment and the distance is whole elements.
    pub fn distance_from(self, origin: Self) -> Option<i64> {
        if self.raw.unit != origin.raw.unit || self.raw.segment != origin.raw.segment {
            return None;
        }
        let d = i128::from(self.raw.offset) - i128::from(origin.raw.offset);
        let size = std::mem::size_of::<T>().max(1) as i128;
        if d % size != 0 {
            return None;
        }
        i64::try_from(d / size).ok()
    }
}

impl<T> GlobalPtr<T> {
    /// Whether the element is the calling unit's own (`dart_gptr_is_local`
    /// in spirit: every unit of the node can still reach the others'
    /// memory through [`GlobalPtr::as_ptr`]).
    pub fn is_local(self, pg: &Pgas) -> bool {
        self.raw.unit == pg.myid()
    }

    /// The element's address here: every unit of the node maps the node
    /// heap at one address, so this works for any unit's element. Checked:
    /// a live segment, a unit of its team, inside the unit's part, aligned
    /// for `T`.
    pub fn as_ptr(self, pg: &Pgas) -> Result<*mut T> {
        pg.local_ptr(self)
    }

    /// The element as a reference (checked as [`GlobalPtr::as_ptr`]).
    ///
    /// # Safety
    /// While the reference lives, no unit writes the element (no put,
    /// atomic or store to it) and its segment is not freed; the element
    /// holds a valid `T`.
    pub unsafe fn as_ref(self, pg: &Pgas) -> Result<&T> {
        let p = pg.local_ptr(self)?;
        // SAFETY: `p` is an aligned `T` inside a live segment mapped here
        // (checked); the caller's guarantee covers validity and aliasing.
        Ok(unsafe { &*p })
    }

    /// The element as a mutable reference (checked as
    /// [`GlobalPtr::as_ptr`]).
    ///
    /// # Safety
    /// While the reference lives, no other unit or reference reads or
    /// writes the element and its segment is not freed; the element holds
    /// a valid `T`.
    #[allow(clippy::mut_from_ref)] // the memory is not the context's
    pub unsafe fn as_mut(self, pg: &Pgas) -> Result<&mut T> {
        let p = pg.local_ptr(self)?;
        // SAFETY: as in `as_ref`; the caller's guarantee makes the
        // reference unique.
        Ok(unsafe { &mut *p })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_128_bits_in_field_order() {
        assert_eq!(std::mem::size_of::<Gptr>(), 16);
        assert_eq!(std::mem::align_of::<Gptr>(), 8);
        assert_eq!(std::mem::offset_of!(Gptr, unit), 0);
        assert_eq!(std::mem::offset_of!(Gptr, segment), 4);
        assert_eq!(std::mem::offset_of!(Gptr, flags), 6);
        assert_eq!(std::mem::offset_of!(Gptr, offset), 8);
        assert_eq!(std::mem::size_of::<GlobalPtr<u64>>(), 16);
    }

    #[test]
    fn arithmetic_counts_elements() {
        let g = GlobalPtr::<u64>::from_raw(Gptr {
            unit: 3,
            segment: 2,
            flags: 1,
            offset: 64,
        });
        let h = g.add(5).unwrap();
        assert_eq!(h.byte_offset(), 104);
        assert_eq!(h.offset(-13).unwrap().byte_offset(), 0);
        assert!(h.offset(-14).is_err());
        assert_eq!(h.distance_from(g), Some(5));
        assert_eq!(h.at_unit(1).distance_from(g), None);
        assert_eq!(
            g.cast::<u8>().add(3).unwrap().distance_from(g.cast()),
            Some(3)
        );
        assert!(g.offset(i64::MAX).is_err());
        let top = GlobalPtr::<u64>::from_raw(Gptr {
            offset: u64::MAX - 7,
            ..Gptr::NULL
        });
        assert!(top.add(1).is_err());
        assert!(g.is_local_to(3) && !g.is_local_to(2));
        assert!(Gptr::NULL.is_null() && !g.raw().is_null());
    }
}
