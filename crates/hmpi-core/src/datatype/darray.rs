//! Distributed arrays (`MPI_Type_create_darray`): the part of a global
//! array that one process of a grid holds, each dimension dealt out in
//! blocks, cyclically, or not at all.
//!
//! The processes form a grid of `psizes`, numbered in row-major order
//! whatever the array's order. In each dimension a process holds a list
//! of runs of global indices (one block, or blocks of `darg` dealt
//! round-robin); the type is built from the fastest varying dimension out,
//! each dimension's runs placed at their global index in a dimension whose
//! extent is the whole dimension. The result has lower bound 0 and the
//! extent of the whole global array, as the standard defines it, so that
//! consecutive elements of the type are consecutive global arrays.

use super::contents::{Constructor, Distribution};
use super::typemap::{Datatype, Order, UserDatatype};
use crate::{Error, Result};

fn arg(reason: String) -> Error {
    Error::Arg { reason }
}

/// The runs `(first global index, length)` that process `coord` of
/// `psize` holds of a dimension of `gsize` elements.
fn runs(
    gsize: usize,
    distrib: Distribution,
    darg: Option<usize>,
    psize: usize,
    coord: usize,
    d: usize,
) -> Result<Vec<(usize, usize)>> {
    match distrib {
        Distribution::None => {
            if psize != 1 {
                return Err(arg(format!(
                    "dimension {d} is not distributed but has {psize} processes (need 1)"
                )));
            }
            Ok(vec![(0, gsize)])
        }
        Distribution::Block => {
            let block = match darg {
                None => gsize.div_ceil(psize),
                Some(b) => {
                    if b == 0 || b.checked_mul(psize).is_none_or(|all| all < gsize) {
                        return Err(arg(format!(
                            "dimension {d}: blocks of {b} on {psize} processes do not cover \
                             {gsize} elements"
                        )));
                    }
                    b
                }
            };
            let first = block.saturating_mul(coord);
            let len = gsize.saturating_sub(first).min(block);
            Ok(if len > 0 {
                vec![(first, len)]
            } else {
                Vec::new()
            })
        }
        Distribution::Cyclic => {
            let block = darg.unwrap_or(1);
            if block == 0 {
                return Err(arg(format!("dimension {d}: cyclic blocks of 0 elements")));
            }
            let step = block.saturating_mul(psize);
            let mut v = Vec::new();
            let mut first = block.saturating_mul(coord);
            while first < gsize {
                v.push((first, block.min(gsize - first)));
                first = match first.checked_add(step) {
                    Some(f) => f,
                    None => break,
                };
            }
            Ok(v)
        }
    }
}

impl UserDatatype {
    /// Process `rank`'s part of a global array of `gsizes` elements of
    /// `oldtype` (dimensions in `order`), distributed over a grid of
    /// `psizes` processes (row-major, `size` of them), each dimension as
    /// `distribs` says with the block sizes `dargs` (`None`:
    /// `MPI_DISTRIBUTE_DFLT_DARG`) (`MPI_Type_create_darray`). Its lower
    /// bound is 0 and its extent the global array's.
    #[allow(clippy::too_many_arguments)]
    pub fn darray(
        size: usize,
        rank: usize,
        gsizes: &[usize],
        distribs: &[Distribution],
        dargs: &[Option<usize>],
        psizes: &[usize],
        order: Order,
        oldtype: &Datatype,
    ) -> Result<UserDatatype> {
        let nd = gsizes.len();
        if nd == 0 || distribs.len() != nd || dargs.len() != nd || psizes.len() != nd {
            return Err(arg(format!(
                "a darray needs as many (at least one) global sizes, distributions, \
                 distribution arguments and process counts: {nd}, {}, {}, {}",
                distribs.len(),
                dargs.len(),
                psizes.len()
            )));
        }
        if rank >= size {
            return Err(arg(format!("rank {rank} of a grid of {size} processes")));
        }
        if let Some(d) = (0..nd).find(|&d| gsizes[d] == 0 || psizes[d] == 0) {
            return Err(arg(format!(
                "dimension {d}: global size {} and {} processes (need at least 1 each)",
                gsizes[d], psizes[d]
            )));
        }
        let procs = psizes
            .iter()
            .try_fold(1usize, |a, &p| a.checked_mul(p))
            .filter(|&p| p == size);
        if procs.is_none() {
            return Err(arg(format!(
                "a grid of {psizes:?} processes is not the {size} processes given"
            )));
        }
        // The process's coordinates, row-major.
        let mut coords = vec![0; nd];
        let (mut left, mut rest) = (size, rank);
        for d in 0..nd {
            left /= psizes[d];
            coords[d] = rest / left;
            rest %= left;
        }
        let dims: Vec<usize> = match order {
            Order::C => (0..nd).rev().collect(),
            Order::Fortran => (0..nd).collect(),
        };
        let mut t = oldtype.clone();
        for &d in &dims {
            let r = runs(gsizes[d], distribs[d], dargs[d], psizes[d], coords[d], d)?;
            let (lens, firsts): (Vec<usize>, Vec<isize>) = r
                .iter()
                .map(|&(f, l)| Ok((l, isize::try_from(f).map_err(|_| too_big())?)))
                .collect::<Result<Vec<_>>>()?
                .into_iter()
                .unzip();
            let placed = UserDatatype::indexed(&lens, &firsts, &t)?;
            let whole = isize::try_from(gsizes[d])
                .ok()
                .and_then(|g| g.checked_mul(t.extent()))
                .ok_or_else(too_big)?;
            t = UserDatatype::resized(&placed, 0, whole)?.into_datatype();
        }
        Ok(UserDatatype::from_datatype(t.made_by(
            Constructor::Darray {
                size,
                rank,
                gsizes: gsizes.to_vec(),
                distribs: distribs.to_vec(),
                dargs: dargs.to_vec(),
                psizes: psizes.to_vec(),
                order,
                old: oldtype.clone(),
            },
        )))
    }
}

fn too_big() -> Error {
    arg("the darray's global array overflows the address space".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::{BasicType, Block, Combiner};

    fn int() -> Datatype {
        Datatype::basic(BasicType::I32)
    }

    /// The blocks a darray must have, element by element: every global
    /// index whose owner (by the standard's rules, computed per index) is
    /// `coords`, in the order of the local array, merged.
    fn expected(
        gsizes: &[usize],
        distribs: &[(Distribution, Option<usize>)],
        psizes: &[usize],
        coords: &[usize],
        order: Order,
    ) -> Vec<Block> {
        let nd = gsizes.len();
        let owner = |d: usize, i: usize| -> usize {
            let (dist, darg) = distribs[d];
            match dist {
                Distribution::None => 0,
                Distribution::Block => i / darg.unwrap_or(gsizes[d].div_ceil(psizes[d])),
                Distribution::Cyclic => (i / darg.unwrap_or(1)) % psizes[d],
            }
        };
        // Local indices per dimension, in increasing global order.
        let mine: Vec<Vec<usize>> = (0..nd)
            .map(|d| {
                (0..gsizes[d])
                    .filter(|&i| owner(d, i) == coords[d])
                    .collect()
            })
            .collect();
        let dims: Vec<usize> = match order {
            Order::C => (0..nd).collect(),
            Order::Fortran => (0..nd).rev().collect(),
        };
        // Odometer over the local indices, slowest dimension first.
        let mut out: Vec<Block> = Vec::new();
        if mine.iter().any(|m| m.is_empty()) {
            return out;
        }
        let mut idx = vec![0usize; nd];
        loop {
            // Global linear offset in elements.
            let mut off = 0usize;
            let mut mult = 1usize;
            for &d in dims.iter().rev() {
                off += mine[d][idx[d]] * mult;
                mult *= gsizes[d];
            }
            let at = (off * 4) as isize;
            match out.last_mut() {
                Some(l) if l.0 + l.1 as isize == at => l.1 += 4,
                _ => out.push((at, 4)),
            }
            // Advance, fastest dimension last in `dims`.
            let mut k = nd;
            loop {
                if k == 0 {
                    return out;
                }
                k -= 1;
                let d = dims[k];
                idx[d] += 1;
                if idx[d] < mine[d].len() {
                    break;
                }
                idx[d] = 0;
            }
        }
    }

    #[test]
    fn darrays_match_element_by_element_ownership() {
        use Distribution::{Block, Cyclic, None as Whole};
        type Dims = (Distribution, Option<usize>);
        let cases: &[(&[usize], &[Dims], &[usize])] = &[
            (&[10], &[(Block, None)], &[3]),
            (&[10], &[(Block, Some(4))], &[3]),
            (&[10], &[(Cyclic, None)], &[3]),
            (&[11], &[(Cyclic, Some(2))], &[3]),
            (&[6, 7], &[(Block, None), (Cyclic, Some(2))], &[2, 2]),
            (&[5, 4], &[(Whole, None), (Block, None)], &[1, 3]),
            (
                &[4, 5, 6],
                &[(Cyclic, None), (Block, None), (Cyclic, Some(4))],
                &[2, 1, 2],
            ),
            (&[3, 8], &[(Block, Some(2)), (Cyclic, Some(3))], &[2, 2]),
        ];
        for &(gsizes, dist, psizes) in cases {
            let size: usize = psizes.iter().product();
            let (distribs, dargs): (Vec<_>, Vec<_>) = dist.iter().copied().unzip();
            for order in [Order::C, Order::Fortran] {
                for rank in 0..size {
                    let t = UserDatatype::darray(
                        size,
                        rank,
                        gsizes,
                        &distribs,
                        &dargs,
                        psizes,
                        order,
                        &int(),
                    )
                    .unwrap();
                    let mut coords = vec![0; psizes.len()];
                    let mut r = rank;
                    for d in (0..psizes.len()).rev() {
                        coords[d] = r % psizes[d];
                        r /= psizes[d];
                    }
                    let want = expected(gsizes, dist, psizes, &coords, order);
                    let what = format!("{gsizes:?} {dist:?} {psizes:?} {order:?} rank {rank}");
                    assert_eq!(t.blocks(), &want[..], "{what}");
                    let total: usize = gsizes.iter().product();
                    assert_eq!(
                        (t.lower_bound(), t.extent()),
                        (0, total as isize * 4),
                        "{what}"
                    );
                    assert_eq!(t.combiner(), Combiner::Darray);
                }
            }
        }
    }

    #[test]
    fn subarrays_match_element_by_element() {
        // Every element of the part, in the order of the array, merged.
        let cases: &[(&[usize], &[usize], &[usize])] = &[
            (&[9], &[4], &[3]),
            (&[4, 6], &[2, 3], &[1, 2]),
            (&[4, 6], &[4, 1], &[0, 5]),
            (&[3, 4, 5], &[2, 2, 3], &[1, 0, 2]),
            (&[2, 3, 2, 3], &[1, 2, 2, 1], &[1, 1, 0, 2]),
        ];
        for &(sizes, subsizes, starts) in cases {
            for order in [Order::C, Order::Fortran] {
                let t = UserDatatype::subarray(sizes, subsizes, starts, order, &int()).unwrap();
                let nd = sizes.len();
                // Dimensions from the slowest varying to the fastest.
                let dims: Vec<usize> = match order {
                    Order::C => (0..nd).collect(),
                    Order::Fortran => (0..nd).rev().collect(),
                };
                let total: usize = subsizes.iter().product();
                let mut want: Vec<Block> = Vec::new();
                for k in 0..total {
                    // The k-th element of the part, fastest dimension last.
                    let (mut rest, mut off, mut mult) = (k, 0usize, 1usize);
                    for &d in dims.iter().rev() {
                        let i = starts[d] + rest % subsizes[d];
                        rest /= subsizes[d];
                        off += i * mult;
                        mult *= sizes[d];
                    }
                    let at = (off * 4) as isize;
                    match want.last_mut() {
                        Some(l) if l.0 + l.1 as isize == at => l.1 += 4,
                        _ => want.push((at, 4)),
                    }
                }
                let what = format!("{sizes:?} {subsizes:?} {starts:?} {order:?}");
                assert_eq!(t.blocks(), &want[..], "{what}");
                let whole: usize = sizes.iter().product();
                assert_eq!(
                    (t.lower_bound(), t.extent()),
                    (0, whole as isize * 4),
                    "{what}"
                );
                assert_eq!(t.combiner(), Combiner::Subarray, "{what}");
            }
        }
    }

    #[test]
    fn a_known_darray_by_hand() {
        // 4x4 ints, block x block on a 2x2 grid, rank 3 = coords (1, 1):
        // rows 2-3, columns 2-3 (C order).
        let t = UserDatatype::darray(
            4,
            3,
            &[4, 4],
            &[Distribution::Block; 2],
            &[None; 2],
            &[2, 2],
            Order::C,
            &int(),
        )
        .unwrap();
        assert_eq!(t.blocks(), &[(40, 8), (56, 8)]);
        assert_eq!((t.size(), t.extent(), t.true_lower_bound()), (16, 64, 40));
        // Cyclic(1) over 3 processes of 7 elements, rank 1: 1 and 4.
        let c = UserDatatype::darray(
            3,
            1,
            &[7],
            &[Distribution::Cyclic],
            &[None],
            &[3],
            Order::Fortran,
            &int(),
        )
        .unwrap();
        assert_eq!(c.blocks(), &[(4, 4), (16, 4)]);
        assert_eq!(c.extent(), 28);
        // A process past the last block holds nothing but keeps the extent.
        let e = UserDatatype::darray(
            4,
            3,
            &[5],
            &[Distribution::Block],
            &[Some(2)],
            &[4],
            Order::C,
            &int(),
        )
        .unwrap();
        assert_eq!((e.size(), e.extent()), (0, 20));
    }

    #[test]
    fn bad_darrays_are_errors() {
        let b = Distribution::Block;
        for bad in [
            UserDatatype::darray(2, 2, &[4], &[b], &[None], &[2], Order::C, &int()),
            UserDatatype::darray(3, 0, &[4], &[b], &[None], &[2], Order::C, &int()),
            UserDatatype::darray(2, 0, &[4], &[b], &[Some(1)], &[2], Order::C, &int()),
            UserDatatype::darray(2, 0, &[0], &[b], &[None], &[2], Order::C, &int()),
            UserDatatype::darray(
                2,
                0,
                &[4],
                &[Distribution::None],
                &[None],
                &[2],
                Order::C,
                &int(),
            ),
            UserDatatype::darray(
                2,
                0,
                &[4],
                &[Distribution::Cyclic],
                &[Some(0)],
                &[2],
                Order::C,
                &int(),
            ),
            UserDatatype::darray(1, 0, &[], &[], &[], &[], Order::C, &int()),
        ] {
            assert!(matches!(bad, Err(Error::Arg { .. })), "{bad:?}");
        }
    }
}
