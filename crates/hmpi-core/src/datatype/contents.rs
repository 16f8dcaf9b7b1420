//! How a datatype was built, and what MPI tells about it: every
//! [`Datatype`] remembers its constructor and arguments ([`Constructor`]),
//! which MPI returns decoded (`MPI_Type_get_envelope`,
//! `MPI_Type_get_contents`: [`Datatype::envelope`],
//! [`Datatype::contents`]); and the predefined types that stand for
//! Fortran kinds and sizes (`MPI_Type_create_f90_*`,
//! `MPI_Type_match_size`: [`UserDatatype::f90_integer`],
//! [`UserDatatype::f90_real`], [`UserDatatype::f90_complex`],
//! [`match_size`]).
//!
//! The contents are laid out as the standard's table of combiners says:
//! integers (`int`), addresses (`MPI_Aint`), large counts (`MPI_Count`,
//! for a type made by a `_c` constructor) and datatypes. Integer arguments
//! that are constants (the array order, the darray distributions,
//! `MPI_UNDEFINED`) are given as the MPI 5.0 standard ABI's values
//! ([`codes`]).
//!
//! ```
//! use hmpi_core::datatype::{BasicType, Combiner, Datatype, UserDatatype};
//!
//! let int = Datatype::basic(BasicType::I32);
//! let v = UserDatatype::vector(3, 2, 5, &int).unwrap();
//! let e = v.envelope();
//! assert_eq!((e.combiner, e.integers, e.datatypes), (Combiner::Vector, 3, 1));
//! let c = v.contents().unwrap();
//! assert_eq!(c.integers, [3, 2, 5]);
//! assert_eq!(c.datatypes[0].predefined(), Some(BasicType::I32));
//! ```

use super::typemap::{BasicType, Datatype, Order, UserDatatype};
use crate::{Error, Result};
use std::sync::Arc;

/// The values of the MPI 5.0 standard ABI for the constants that appear
/// among the integers of a type's contents.
pub mod codes {
    /// `MPI_UNDEFINED`.
    pub const UNDEFINED: i64 = -32766;
    /// `MPI_ORDER_C`.
    pub const ORDER_C: i64 = 0xC;
    /// `MPI_ORDER_FORTRAN`.
    pub const ORDER_FORTRAN: i64 = 0xF;
    /// `MPI_DISTRIBUTE_NONE`.
    pub const DISTRIBUTE_NONE: i64 = 16;
    /// `MPI_DISTRIBUTE_BLOCK`.
    pub const DISTRIBUTE_BLOCK: i64 = 17;
    /// `MPI_DISTRIBUTE_CYCLIC`.
    pub const DISTRIBUTE_CYCLIC: i64 = 18;
    /// `MPI_DISTRIBUTE_DFLT_DARG`.
    pub const DISTRIBUTE_DFLT_DARG: i64 = 19;
}

/// How the elements of one dimension of a distributed array
/// ([`UserDatatype::darray`]) are dealt to the processes of that
/// dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// Not distributed: every process of the dimension (there must be one)
    /// holds all of it (`MPI_DISTRIBUTE_NONE`).
    None,
    /// One block per process, of the given size or, by default, of
    /// ⌈size / processes⌉ elements (`MPI_DISTRIBUTE_BLOCK`).
    Block,
    /// Blocks of the given size (1 by default) dealt round-robin
    /// (`MPI_DISTRIBUTE_CYCLIC`).
    Cyclic,
}

impl Distribution {
    /// Its value in the standard ABI.
    pub const fn code(self) -> i64 {
        match self {
            Distribution::None => codes::DISTRIBUTE_NONE,
            Distribution::Block => codes::DISTRIBUTE_BLOCK,
            Distribution::Cyclic => codes::DISTRIBUTE_CYCLIC,
        }
    }

    /// The distribution of a standard ABI value.
    pub fn from_code(c: i64) -> Option<Distribution> {
        match c {
            codes::DISTRIBUTE_NONE => Some(Distribution::None),
            codes::DISTRIBUTE_BLOCK => Some(Distribution::Block),
            codes::DISTRIBUTE_CYCLIC => Some(Distribution::Cyclic),
            _ => None,
        }
    }
}

impl Order {
    /// Its value in the standard ABI.
    pub const fn code(self) -> i64 {
        match self {
            Order::C => codes::ORDER_C,
            Order::Fortran => codes::ORDER_FORTRAN,
        }
    }

    /// The order of a standard ABI value.
    pub fn from_code(c: i64) -> Option<Order> {
        match c {
            codes::ORDER_C => Some(Order::C),
            codes::ORDER_FORTRAN => Some(Order::Fortran),
            _ => None,
        }
    }
}

/// Which constructor made a type (`MPI_COMBINER_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Combiner {
    /// A predefined type.
    Named,
    /// `MPI_Type_dup`.
    Dup,
    /// `MPI_Type_contiguous`.
    Contiguous,
    /// `MPI_Type_vector`.
    Vector,
    /// `MPI_Type_create_hvector`.
    Hvector,
    /// `MPI_Type_indexed`.
    Indexed,
    /// `MPI_Type_create_hindexed`.
    Hindexed,
    /// `MPI_Type_create_indexed_block`.
    IndexedBlock,
    /// `MPI_Type_create_hindexed_block`.
    HindexedBlock,
    /// `MPI_Type_create_struct`.
    Struct,
    /// `MPI_Type_create_subarray`.
    Subarray,
    /// `MPI_Type_create_darray`.
    Darray,
    /// `MPI_Type_create_f90_real`.
    F90Real,
    /// `MPI_Type_create_f90_complex`.
    F90Complex,
    /// `MPI_Type_create_f90_integer`.
    F90Integer,
    /// `MPI_Type_create_resized`.
    Resized,
}

/// A constructor and the arguments it was given (counts as numbers, the
/// types it was built from as [`Datatype`]s, which the record keeps).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Constructor {
    /// A predefined type.
    Named,
    /// A copy of a type.
    Dup(Datatype),
    /// `count` elements.
    Contiguous {
        /// The number of elements or blocks.
        count: usize,
        /// The type it was built from.
        old: Datatype,
    },
    /// A vector, stride in elements.
    Vector {
        /// The number of elements or blocks.
        count: usize,
        /// Elements per block.
        blocklength: usize,
        /// Elements (vector) or bytes (hvector) between block starts.
        stride: isize,
        /// The type it was built from.
        old: Datatype,
    },
    /// A vector, stride in bytes.
    Hvector {
        /// The number of elements or blocks.
        count: usize,
        /// Elements per block.
        blocklength: usize,
        /// Elements (vector) or bytes (hvector) between block starts.
        stride: isize,
        /// The type it was built from.
        old: Datatype,
    },
    /// Blocks at displacements in elements.
    Indexed {
        /// Elements in each block.
        blocklengths: Vec<usize>,
        /// Where each block starts, in elements (indexed) or bytes.
        displacements: Vec<isize>,
        /// The type it was built from.
        old: Datatype,
    },
    /// Blocks at displacements in bytes.
    Hindexed {
        /// Elements in each block.
        blocklengths: Vec<usize>,
        /// Where each block starts, in elements (indexed) or bytes.
        displacements: Vec<isize>,
        /// The type it was built from.
        old: Datatype,
    },
    /// Blocks of one length at displacements in elements.
    IndexedBlock {
        /// Elements per block.
        blocklength: usize,
        /// Where each block starts, in elements (indexed) or bytes.
        displacements: Vec<isize>,
        /// The type it was built from.
        old: Datatype,
    },
    /// Blocks of one length at displacements in bytes.
    HindexedBlock {
        /// Elements per block.
        blocklength: usize,
        /// Where each block starts, in elements (indexed) or bytes.
        displacements: Vec<isize>,
        /// The type it was built from.
        old: Datatype,
    },
    /// Blocks of several types at displacements in bytes.
    Struct {
        /// Elements in each block.
        blocklengths: Vec<usize>,
        /// Where each block starts, in elements (indexed) or bytes.
        displacements: Vec<isize>,
        /// The type of each block.
        types: Vec<Datatype>,
    },
    /// A part of an array.
    Subarray {
        /// The array's size in each dimension.
        sizes: Vec<usize>,
        /// The part's size in each dimension.
        subsizes: Vec<usize>,
        /// Where the part starts in each dimension.
        starts: Vec<usize>,
        /// The order of the dimensions.
        order: Order,
        /// The type it was built from.
        old: Datatype,
    },
    /// One process's part of a distributed array (`dargs`: `None` is
    /// `MPI_DISTRIBUTE_DFLT_DARG`).
    Darray {
        /// The processes of the grid.
        size: usize,
        /// The process whose part this is.
        rank: usize,
        /// The global array's size in each dimension.
        gsizes: Vec<usize>,
        /// How each dimension is distributed.
        distribs: Vec<Distribution>,
        /// The block size of each dimension.
        dargs: Vec<Option<usize>>,
        /// The processes in each dimension.
        psizes: Vec<usize>,
        /// The order of the dimensions.
        order: Order,
        /// The type it was built from.
        old: Datatype,
    },
    /// A Fortran `REAL` kind (`None`: `MPI_UNDEFINED`).
    F90Real {
        /// Decimal digits of precision.
        p: Option<u32>,
        /// Decimal digits of exponent range.
        r: Option<u32>,
    },
    /// A Fortran `COMPLEX` kind.
    F90Complex {
        /// Decimal digits of precision.
        p: Option<u32>,
        /// Decimal digits of exponent range.
        r: Option<u32>,
    },
    /// A Fortran `INTEGER` kind.
    F90Integer {
        /// Decimal digits of exponent range.
        r: u32,
    },
    /// Another lower bound and extent.
    Resized {
        /// The lower bound.
        lb: isize,
        /// The extent.
        extent: isize,
        /// The type it was built from.
        old: Datatype,
    },
}

/// What a derived type's map records besides its blocks: its constructor,
/// and whether it was made by a large-count (`_c`) constructor.
#[derive(Debug)]
pub(crate) struct How {
    pub(crate) constructor: Constructor,
    pub(crate) large: bool,
}

/// The sizes of a type's contents and its combiner
/// (`MPI_Type_get_envelope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    /// The constructor.
    pub combiner: Combiner,
    /// Integer (`int`) arguments.
    pub integers: usize,
    /// Address (`MPI_Aint`) arguments.
    pub addresses: usize,
    /// Large count (`MPI_Count`) arguments: some only for a type made by a
    /// `_c` constructor.
    pub large_counts: usize,
    /// Datatype arguments.
    pub datatypes: usize,
}

/// A derived type's constructor arguments (`MPI_Type_get_contents`).
#[derive(Debug, Clone)]
pub struct Contents {
    /// The integer arguments.
    pub integers: Vec<i64>,
    /// The address arguments.
    pub addresses: Vec<isize>,
    /// The large count arguments.
    pub large_counts: Vec<i64>,
    /// The datatypes it was built from.
    pub datatypes: Vec<Datatype>,
}

fn n(v: usize) -> i64 {
    // A count held in memory fits in 63 bits.
    v as i64
}

impl Datatype {
    /// How this type was built ([`Constructor::Named`] for a predefined
    /// type).
    pub fn constructor(&self) -> &Constructor {
        static NAMED: Constructor = Constructor::Named;
        match &self.0.how {
            Some(h) => &h.constructor,
            None => &NAMED,
        }
    }

    /// Whether a large-count (`_c`) constructor made this type (its counts
    /// are then large counts in its contents).
    pub fn made_with_large_counts(&self) -> bool {
        self.0.how.as_ref().is_some_and(|h| h.large)
    }

    /// The combiner and the sizes of the contents.
    pub fn envelope(&self) -> Envelope {
        let combiner = self.combiner();
        match self.contents() {
            Ok(c) => Envelope {
                combiner,
                integers: c.integers.len(),
                addresses: c.addresses.len(),
                large_counts: c.large_counts.len(),
                datatypes: c.datatypes.len(),
            },
            Err(_) => Envelope {
                combiner,
                integers: 0,
                addresses: 0,
                large_counts: 0,
                datatypes: 0,
            },
        }
    }

    /// The combiner alone.
    pub fn combiner(&self) -> Combiner {
        use Constructor as K;
        match self.constructor() {
            K::Named => Combiner::Named,
            K::Dup(_) => Combiner::Dup,
            K::Contiguous { .. } => Combiner::Contiguous,
            K::Vector { .. } => Combiner::Vector,
            K::Hvector { .. } => Combiner::Hvector,
            K::Indexed { .. } => Combiner::Indexed,
            K::Hindexed { .. } => Combiner::Hindexed,
            K::IndexedBlock { .. } => Combiner::IndexedBlock,
            K::HindexedBlock { .. } => Combiner::HindexedBlock,
            K::Struct { .. } => Combiner::Struct,
            K::Subarray { .. } => Combiner::Subarray,
            K::Darray { .. } => Combiner::Darray,
            K::F90Real { .. } => Combiner::F90Real,
            K::F90Complex { .. } => Combiner::F90Complex,
            K::F90Integer { .. } => Combiner::F90Integer,
            K::Resized { .. } => Combiner::Resized,
        }
    }

    /// The arguments of the constructor, laid out as the standard's table
    /// of combiners says (for a `_c` constructor, its large-count layout).
    /// A predefined type has none: [`Error::Type`].
    pub fn contents(&self) -> Result<Contents> {
        use Constructor as K;
        let large = self.made_with_large_counts();
        let mut c = Contents {
            integers: Vec::new(),
            addresses: Vec::new(),
            large_counts: Vec::new(),
            datatypes: Vec::new(),
        };
        // Counts go to the integers, or to the large counts for a `_c`
        // constructor; byte displacements to the addresses or the large
        // counts.
        let count = |c: &mut Contents, v: i64| {
            if large {
                c.large_counts.push(v)
            } else {
                c.integers.push(v)
            }
        };
        let addr = |c: &mut Contents, v: isize| {
            if large {
                c.large_counts.push(v as i64)
            } else {
                c.addresses.push(v)
            }
        };
        match self.constructor() {
            K::Named => {
                return Err(Error::Type {
                    reason: "a predefined datatype has no contents".into(),
                })
            }
            K::Dup(old) => c.datatypes.push(old.clone()),
            K::Contiguous { count: k, old } => {
                count(&mut c, n(*k));
                c.datatypes.push(old.clone());
            }
            K::Vector {
                count: k,
                blocklength,
                stride,
                old,
            } => {
                count(&mut c, n(*k));
                count(&mut c, n(*blocklength));
                count(&mut c, *stride as i64);
                c.datatypes.push(old.clone());
            }
            K::Hvector {
                count: k,
                blocklength,
                stride,
                old,
            } => {
                count(&mut c, n(*k));
                count(&mut c, n(*blocklength));
                addr(&mut c, *stride);
                c.datatypes.push(old.clone());
            }
            K::Indexed {
                blocklengths,
                displacements,
                old,
            } => {
                count(&mut c, n(blocklengths.len()));
                for &b in blocklengths {
                    count(&mut c, n(b));
                }
                for &d in displacements {
                    count(&mut c, d as i64);
                }
                c.datatypes.push(old.clone());
            }
            K::Hindexed {
                blocklengths,
                displacements,
                old,
            } => {
                count(&mut c, n(blocklengths.len()));
                for &b in blocklengths {
                    count(&mut c, n(b));
                }
                for &d in displacements {
                    addr(&mut c, d);
                }
                c.datatypes.push(old.clone());
            }
            K::IndexedBlock {
                blocklength,
                displacements,
                old,
            } => {
                count(&mut c, n(displacements.len()));
                count(&mut c, n(*blocklength));
                for &d in displacements {
                    count(&mut c, d as i64);
                }
                c.datatypes.push(old.clone());
            }
            K::HindexedBlock {
                blocklength,
                displacements,
                old,
            } => {
                count(&mut c, n(displacements.len()));
                count(&mut c, n(*blocklength));
                for &d in displacements {
                    addr(&mut c, d);
                }
                c.datatypes.push(old.clone());
            }
            K::Struct {
                blocklengths,
                displacements,
                types,
            } => {
                count(&mut c, n(blocklengths.len()));
                for &b in blocklengths {
                    count(&mut c, n(b));
                }
                for &d in displacements {
                    addr(&mut c, d);
                }
                c.datatypes.extend(types.iter().cloned());
            }
            K::Subarray {
                sizes,
                subsizes,
                starts,
                order,
                old,
            } => {
                // ndims and the order are always integers.
                c.integers.push(n(sizes.len()));
                for v in [sizes, subsizes, starts] {
                    for &x in v {
                        count(&mut c, n(x));
                    }
                }
                c.integers.push(order.code());
                c.datatypes.push(old.clone());
            }
            K::Darray {
                size,
                rank,
                gsizes,
                distribs,
                dargs,
                psizes,
                order,
                old,
            } => {
                // Only the global sizes are large counts.
                c.integers.extend([n(*size), n(*rank), n(gsizes.len())]);
                for &g in gsizes {
                    count(&mut c, n(g));
                }
                c.integers.extend(distribs.iter().map(|d| d.code()));
                c.integers.extend(
                    dargs
                        .iter()
                        .map(|d| d.map_or(codes::DISTRIBUTE_DFLT_DARG, n)),
                );
                c.integers.extend(psizes.iter().map(|&p| n(p)));
                c.integers.push(order.code());
                c.datatypes.push(old.clone());
            }
            K::F90Real { p, r } | K::F90Complex { p, r } => {
                let u = |v: &Option<u32>| v.map_or(codes::UNDEFINED, i64::from);
                c.integers.extend([u(p), u(r)]);
            }
            K::F90Integer { r } => c.integers.push(i64::from(*r)),
            K::Resized { lb, extent, old } => {
                addr(&mut c, *lb);
                addr(&mut c, *extent);
                c.datatypes.push(old.clone());
            }
        }
        Ok(c)
    }

    /// This type, recorded as made by `c` (the type was just built, so the
    /// map is not shared and is not copied).
    pub(crate) fn made_by(mut self, c: Constructor) -> Datatype {
        let m = Arc::make_mut(&mut self.0);
        m.how = Some(Arc::new(How {
            constructor: c,
            large: false,
        }));
        m.predefined = None;
        m.handle = None;
        self
    }
}

impl UserDatatype {
    /// Marks this type as made by a large-count (`_c`) constructor, whose
    /// contents give its counts and displacements as large counts.
    pub fn with_large_counts(self) -> UserDatatype {
        let mut t = self.into_datatype();
        let m = Arc::make_mut(&mut t.0);
        if let Some(h) = &m.how {
            m.how = Some(Arc::new(How {
                constructor: h.constructor.clone(),
                large: true,
            }));
        }
        UserDatatype::from_datatype(t)
    }

    /// The predefined integer type with at least `r` decimal digits of
    /// range, as Fortran's `SELECTED_INT_KIND(r)` chooses
    /// (`MPI_Type_create_f90_integer`): 1, 2, 4, 8 or 16 bytes; a range
    /// that no kind has is [`Error::Arg`].
    pub fn f90_integer(r: i32) -> Result<UserDatatype> {
        let b = match r {
            0..=2 => BasicType::I8,
            3..=4 => BasicType::I16,
            5..=9 => BasicType::I32,
            10..=18 => BasicType::I64,
            19..=38 => BasicType::I128,
            _ => {
                return Err(Error::Arg {
                    reason: format!("no integer kind has a range of {r} decimal digits"),
                })
            }
        };
        Ok(UserDatatype::from_datatype(
            Datatype::basic(b).made_by(Constructor::F90Integer { r: r as u32 }),
        ))
    }

    /// The predefined real type with at least `p` decimal digits of
    /// precision and `r` of exponent range (`None`: `MPI_UNDEFINED`, not
    /// both), as Fortran's `SELECTED_REAL_KIND(p, r)` chooses
    /// (`MPI_Type_create_f90_real`): 4, 8 or 16 bytes; an impossible
    /// precision or range is [`Error::Arg`].
    pub fn f90_real(p: Option<i32>, r: Option<i32>) -> Result<UserDatatype> {
        let (b, p, r) = real_kind(p, r)?;
        Ok(UserDatatype::from_datatype(
            Datatype::basic(b).made_by(Constructor::F90Real { p, r }),
        ))
    }

    /// The predefined complex type whose halves are
    /// [`UserDatatype::f90_real`]`(p, r)` (`MPI_Type_create_f90_complex`).
    pub fn f90_complex(p: Option<i32>, r: Option<i32>) -> Result<UserDatatype> {
        let (b, p, r) = real_kind(p, r)?;
        let c = match b {
            BasicType::F32 => BasicType::ComplexF32,
            BasicType::F64 => BasicType::ComplexF64,
            _ => BasicType::ComplexF128,
        };
        Ok(UserDatatype::from_datatype(
            Datatype::basic(c).made_by(Constructor::F90Complex { p, r }),
        ))
    }
}

/// The basic real type of `SELECTED_REAL_KIND(p, r)` and the arguments
/// as recorded.
fn real_kind(p: Option<i32>, r: Option<i32>) -> Result<(BasicType, Option<u32>, Option<u32>)> {
    let bad = |what: String| Err(Error::Arg { reason: what });
    let (pu, ru) = match (p, r) {
        (None, None) => return bad("a precision or a range (not both MPI_UNDEFINED)".into()),
        (Some(v), _) | (_, Some(v)) if v < 0 => {
            return bad(format!("a negative precision or range ({v})"))
        }
        _ => (p.unwrap_or(0) as u32, r.unwrap_or(0) as u32),
    };
    let b = if pu <= 6 && ru <= 37 {
        BasicType::F32
    } else if pu <= 15 && ru <= 307 {
        BasicType::F64
    } else if pu <= 33 && ru <= 4931 {
        BasicType::F128
    } else {
        return bad(format!(
            "no real kind has {pu} decimal digits of precision and an exponent range of {ru}"
        ));
    };
    Ok((b, p.map(|v| v as u32), r.map(|v| v as u32)))
}

/// What kind of number `MPI_Type_match_size` looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeClass {
    /// `MPI_TYPECLASS_INTEGER`.
    Integer,
    /// `MPI_TYPECLASS_REAL`.
    Real,
    /// `MPI_TYPECLASS_COMPLEX`.
    Complex,
}

/// The basic type of a class and size in bytes (`MPI_Type_match_size`):
/// integers of 1–16 bytes, reals of 2–16, complex numbers of 4–32; any
/// other size is [`Error::Arg`].
pub fn match_size(class: TypeClass, size: usize) -> Result<BasicType> {
    use BasicType::*;
    let b = match (class, size) {
        (TypeClass::Integer, 1) => I8,
        (TypeClass::Integer, 2) => I16,
        (TypeClass::Integer, 4) => I32,
        (TypeClass::Integer, 8) => I64,
        (TypeClass::Integer, 16) => I128,
        (TypeClass::Real, 2) => F16,
        (TypeClass::Real, 4) => F32,
        (TypeClass::Real, 8) => F64,
        (TypeClass::Real, 16) => F128,
        (TypeClass::Complex, 4) => ComplexF16,
        (TypeClass::Complex, 8) => ComplexF32,
        (TypeClass::Complex, 16) => ComplexF64,
        (TypeClass::Complex, 32) => ComplexF128,
        _ => {
            return Err(Error::Arg {
                reason: format!("no {class:?} type has {size} bytes"),
            })
        }
    };
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int() -> Datatype {
        Datatype::basic(BasicType::I32)
    }

    fn is_int(t: &Datatype) -> bool {
        t.predefined() == Some(BasicType::I32)
    }

    #[test]
    fn every_constructor_round_trips_its_arguments() {
        let i = int();
        let d = Datatype::basic(BasicType::F64);
        let c = UserDatatype::contiguous(5, &i).unwrap();
        let e = c.envelope();
        assert_eq!(
            e,
            Envelope {
                combiner: Combiner::Contiguous,
                integers: 1,
                addresses: 0,
                large_counts: 0,
                datatypes: 1
            }
        );
        let k = c.contents().unwrap();
        assert_eq!(k.integers, [5]);
        assert!(is_int(&k.datatypes[0]));

        let h = UserDatatype::heterogeneous_vector(3, 2, -40, &d).unwrap();
        let k = h.contents().unwrap();
        assert_eq!(
            (h.combiner(), &k.integers[..], &k.addresses[..]),
            (Combiner::Hvector, &[3, 2][..], &[-40][..])
        );

        let x = UserDatatype::indexed(&[1, 2], &[4, -1], &i).unwrap();
        let k = x.contents().unwrap();
        assert_eq!(
            (x.combiner(), &k.integers[..]),
            (Combiner::Indexed, &[2, 1, 2, 4, -1][..])
        );

        let x = UserDatatype::heterogeneous_indexed(&[1, 2], &[16, 0], &i).unwrap();
        let k = x.contents().unwrap();
        assert_eq!(
            (&k.integers[..], &k.addresses[..]),
            (&[2, 1, 2][..], &[16, 0][..])
        );

        let x = UserDatatype::indexed_block(3, &[0, 7, 9], &i).unwrap();
        let k = x.contents().unwrap();
        assert_eq!(
            (x.combiner(), &k.integers[..]),
            (Combiner::IndexedBlock, &[3, 3, 0, 7, 9][..])
        );

        let x = UserDatatype::heterogeneous_indexed_block(2, &[8, 24], &i).unwrap();
        let k = x.contents().unwrap();
        assert_eq!(
            (x.combiner(), &k.integers[..], &k.addresses[..]),
            (Combiner::HindexedBlock, &[2, 2][..], &[8, 24][..])
        );

        // A struct's datatypes are its members, derived ones included.
        let s = UserDatatype::structured(&[1, 2], &[0, 8], &[i.clone(), c.clone().into()]).unwrap();
        let k = s.contents().unwrap();
        assert_eq!(
            (&k.integers[..], &k.addresses[..]),
            (&[2, 1, 2][..], &[0, 8][..])
        );
        assert!(is_int(&k.datatypes[0]));
        assert_eq!(k.datatypes[1].combiner(), Combiner::Contiguous);
        assert!(k.datatypes[1].ptr_eq(&c));

        let sub = UserDatatype::subarray(&[4, 5], &[2, 3], &[1, 0], Order::Fortran, &i).unwrap();
        let k = sub.contents().unwrap();
        assert_eq!(sub.combiner(), Combiner::Subarray);
        assert_eq!(k.integers, [2, 4, 5, 2, 3, 1, 0, codes::ORDER_FORTRAN]);

        let da = UserDatatype::darray(
            4,
            1,
            &[8, 6],
            &[Distribution::Block, Distribution::Cyclic],
            &[None, Some(2)],
            &[2, 2],
            Order::C,
            &i,
        )
        .unwrap();
        let k = da.contents().unwrap();
        assert_eq!(
            k.integers,
            [
                4,
                1,
                2,
                8,
                6,
                codes::DISTRIBUTE_BLOCK,
                codes::DISTRIBUTE_CYCLIC,
                codes::DISTRIBUTE_DFLT_DARG,
                2,
                2,
                2,
                codes::ORDER_C
            ]
        );

        let r = UserDatatype::resized(&s, -8, 64).unwrap();
        let k = r.contents().unwrap();
        assert_eq!(
            (r.combiner(), &k.addresses[..]),
            (Combiner::Resized, &[-8, 64][..])
        );
        assert!(k.datatypes[0].ptr_eq(&s));

        let du = UserDatatype::dup(&r);
        assert_eq!(du.envelope().datatypes, 1);
        assert!(du.contents().unwrap().datatypes[0].ptr_eq(&r));

        let v = UserDatatype::vector(2, 1, 3, &i).unwrap();
        assert_eq!(v.contents().unwrap().integers, [2, 1, 3]);
    }

    #[test]
    fn large_count_constructors_give_large_counts() {
        let i = int();
        let v = UserDatatype::vector(2, 1, 3, &i)
            .unwrap()
            .with_large_counts();
        assert!(v.made_with_large_counts());
        let k = v.contents().unwrap();
        assert_eq!((k.integers.len(), &k.large_counts[..]), (0, &[2, 1, 3][..]));
        let s = UserDatatype::structured(&[1], &[4], &[&i])
            .unwrap()
            .with_large_counts();
        let e = s.envelope();
        assert_eq!(
            (e.integers, e.addresses, e.large_counts, e.datatypes),
            (0, 0, 3, 1)
        );
        let sub = UserDatatype::subarray(&[4], &[2], &[1], Order::C, &i)
            .unwrap()
            .with_large_counts();
        let k = sub.contents().unwrap();
        assert_eq!(
            (&k.integers[..], &k.large_counts[..]),
            (&[1, codes::ORDER_C][..], &[4, 2, 1][..])
        );
        let r = UserDatatype::resized(&i, 0, 8).unwrap().with_large_counts();
        assert_eq!(r.contents().unwrap().large_counts, [0, 8]);
        // A type built from a large-count type is not one itself.
        assert!(!UserDatatype::dup(&r).made_with_large_counts());
    }

    #[test]
    fn predefined_types_are_named_and_have_no_contents() {
        let e = int().envelope();
        assert_eq!(
            (e.combiner, e.integers, e.datatypes),
            (Combiner::Named, 0, 0)
        );
        assert!(matches!(int().contents(), Err(Error::Type { .. })));
    }

    #[test]
    fn fortran_kinds_and_sizes() {
        let t = UserDatatype::f90_integer(9).unwrap();
        assert_eq!(
            (t.basic_type(), t.combiner()),
            (Some(BasicType::I32), Combiner::F90Integer)
        );
        assert_eq!(t.contents().unwrap().integers, [9]);
        assert_eq!(UserDatatype::f90_integer(10).unwrap().size(), 8);
        assert_eq!(UserDatatype::f90_integer(2).unwrap().size(), 1);
        assert_eq!(UserDatatype::f90_integer(38).unwrap().size(), 16);
        assert!(matches!(
            UserDatatype::f90_integer(39),
            Err(Error::Arg { .. })
        ));
        assert!(matches!(
            UserDatatype::f90_integer(-1),
            Err(Error::Arg { .. })
        ));
        let r = UserDatatype::f90_real(Some(15), None).unwrap();
        assert_eq!(r.basic_type(), Some(BasicType::F64));
        assert_eq!(r.contents().unwrap().integers, [15, codes::UNDEFINED]);
        assert_eq!(UserDatatype::f90_real(None, Some(37)).unwrap().size(), 4);
        assert_eq!(UserDatatype::f90_real(Some(7), Some(2)).unwrap().size(), 8);
        assert_eq!(UserDatatype::f90_real(Some(30), None).unwrap().size(), 16);
        assert!(matches!(
            UserDatatype::f90_real(Some(34), None),
            Err(Error::Arg { .. })
        ));
        assert!(matches!(
            UserDatatype::f90_real(None, Some(5000)),
            Err(Error::Arg { .. })
        ));
        assert!(matches!(
            UserDatatype::f90_real(None, None),
            Err(Error::Arg { .. })
        ));
        let c = UserDatatype::f90_complex(Some(6), Some(30)).unwrap();
        assert_eq!(
            (c.basic_type(), c.combiner()),
            (Some(BasicType::ComplexF32), Combiner::F90Complex)
        );
        assert_eq!(match_size(TypeClass::Integer, 8).unwrap(), BasicType::I64);
        assert_eq!(match_size(TypeClass::Real, 4).unwrap(), BasicType::F32);
        assert_eq!(
            match_size(TypeClass::Complex, 16).unwrap(),
            BasicType::ComplexF64
        );
        assert!(matches!(
            match_size(TypeClass::Real, 3),
            Err(Error::Arg { .. })
        ));
        for class in [TypeClass::Integer, TypeClass::Real, TypeClass::Complex] {
            for size in 0..40 {
                if let Ok(b) = match_size(class, size) {
                    assert_eq!(b.size(), size);
                }
            }
        }
    }
}
