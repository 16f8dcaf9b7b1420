//! Groups: ordered sets of processes ([`Group`]), as in MPI.
//!
//! A group lists world ranks; a process's rank in the group is its
//! position in that list. Groups are local objects: building one does not
//! communicate. Under an MPI launcher (feature `mpi`, see
//! [`crate::multinode`]) the world spans nodes, and every group the typed
//! API gives or takes — of a communicator spanning nodes or of a
//! node-local one — names processes by MPI's world rank, so that groups of
//! either kind compare and translate; a node-local communicator takes only
//! groups of its node's processes. A communicator's group is [`crate::traits::Communicator::group`];
//! [`crate::traits::Communicator::split_by_subgroup_collective`] makes a
//! communicator of a subgroup.
//!
//! # Example
//! ```
//! use hmpi_core::Group;
//!
//! // World ranks 0..6; this process is world rank 2.
//! let all = Group::from_world_ranks(vec![0, 1, 2, 3, 4, 5], 2).unwrap();
//! let even = all.incl(&[0, 2, 4]).unwrap(); // world ranks 0, 2, 4
//! let low = all.incl(&[0, 1, 2]).unwrap(); // world ranks 0, 1, 2
//! assert_eq!(even.intersection(&low).world_ranks(), &[0, 2]);
//! assert_eq!(even.union(&low).world_ranks(), &[0, 2, 4, 1]);
//! assert_eq!(even.difference(&low).world_ranks(), &[4]);
//! assert_eq!(all.excl(&[0, 5]).unwrap().world_ranks(), &[1, 2, 3, 4]);
//! assert_eq!(even.rank(), Some(1));
//! assert_eq!(even.translate_ranks(&[1, 2], &low).unwrap(), vec![Some(2), None]);
//! assert!(all.incl(&[1, 1]).is_err());
//! ```

use crate::error::{Error, Result};
use std::sync::Arc;

/// An ordered set of processes (`MPI_Group`). Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// World ranks, by group rank.
    ranks: Arc<[i32]>,
    /// The calling process's world rank.
    me: i32,
}

/// How two groups compare (`MPI_Group_compare`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupRelation {
    /// The same members in the same order (`MPI_IDENT`).
    Identical,
    /// The same members in another order (`MPI_SIMILAR`).
    Similar,
    /// Different members (`MPI_UNEQUAL`).
    Unequal,
}

impl Group {
    /// A group of these world ranks in this order, seen by the process
    /// whose world rank is `me`. Ranks must be distinct and non-negative.
    pub fn from_world_ranks(ranks: Vec<i32>, me: i32) -> Result<Group> {
        let mut sorted = ranks.clone();
        sorted.sort_unstable();
        if let Some(&r) = sorted.iter().find(|&&r| r < 0) {
            return Err(Error::Group {
                reason: format!("world rank {r} is negative"),
            });
        }
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::Group {
                reason: format!("world rank {} is listed twice", w[0]),
            });
        }
        Ok(Group {
            ranks: ranks.into(),
            me,
        })
    }

    /// A group in which a world rank may appear more than once: the
    /// group of an endpoints communicator ([`crate::endpoints`]), whose
    /// processes appear once per endpoint. Set operations and rank
    /// translations see the first appearance of a process.
    pub(crate) fn with_repeats(ranks: Vec<i32>, me: i32) -> Group {
        Group::of(ranks, me)
    }

    /// The group of `ranks` seen by world rank `me`, unchecked (the
    /// caller's ranks are distinct and non-negative).
    pub(crate) fn of(ranks: Vec<i32>, me: i32) -> Group {
        Group {
            ranks: ranks.into(),
            me,
        }
    }

    /// The empty group (`MPI_GROUP_EMPTY`).
    pub fn empty(me: i32) -> Group {
        Group::of(Vec::new(), me)
    }

    /// The number of processes.
    pub fn size(&self) -> i32 {
        self.ranks.len() as i32
    }

    /// The calling process's rank in the group, `None` if it is not a
    /// member (`MPI_UNDEFINED`).
    pub fn rank(&self) -> Option<i32> {
        self.ranks
            .iter()
            .position(|&r| r == self.me)
            .map(|p| p as i32)
    }

    /// The members' world ranks, by group rank.
    pub fn world_ranks(&self) -> &[i32] {
        &self.ranks
    }

    /// The world rank of group rank `rank`.
    #[inline]
    pub fn world_rank(&self, rank: i32) -> Result<i32> {
        usize::try_from(rank)
            .ok()
            .and_then(|i| self.ranks.get(i).copied())
            .ok_or_else(|| Error::Rank {
                rank,
                size: self.size(),
            })
    }

    fn contains(&self, world: i32) -> bool {
        self.ranks.contains(&world)
    }

    /// The group of the listed ranks of this group, in the listed order
    /// (`MPI_Group_incl`). Each must be a valid, distinct rank.
    pub fn incl(&self, ranks: &[i32]) -> Result<Group> {
        let w = ranks
            .iter()
            .map(|&r| self.world_rank(r))
            .collect::<Result<Vec<_>>>()?;
        Group::from_world_ranks(w, self.me)
    }

    /// This group without the listed ranks (`MPI_Group_excl`). Each must
    /// be a valid, distinct rank.
    pub fn excl(&self, ranks: &[i32]) -> Result<Group> {
        let drop = ranks
            .iter()
            .map(|&r| self.world_rank(r))
            .collect::<Result<Vec<_>>>()?;
        Group::from_world_ranks(drop.clone(), self.me)?; // distinctness
        Ok(Group::of(
            self.ranks
                .iter()
                .copied()
                .filter(|r| !drop.contains(r))
                .collect(),
            self.me,
        ))
    }

    /// [`Group::incl`] under rsmpi's name.
    pub fn include(&self, ranks: &[i32]) -> Result<Group> {
        self.incl(ranks)
    }

    /// [`Group::excl`] under rsmpi's name.
    pub fn exclude(&self, ranks: &[i32]) -> Result<Group> {
        self.excl(ranks)
    }

    /// This group's members, then `other`'s that are not in this group
    /// (`MPI_Group_union`).
    pub fn union(&self, other: &Group) -> Group {
        let mut v = self.ranks.to_vec();
        v.extend(other.ranks.iter().copied().filter(|&r| !self.contains(r)));
        Group::of(v, self.me)
    }

    /// This group's members that are also in `other`, in this group's order
    /// (`MPI_Group_intersection`).
    pub fn intersection(&self, other: &Group) -> Group {
        Group::of(
            self.ranks
                .iter()
                .copied()
                .filter(|&r| other.contains(r))
                .collect(),
            self.me,
        )
    }

    /// This group's members that are not in `other`, in this group's order
    /// (`MPI_Group_difference`).
    pub fn difference(&self, other: &Group) -> Group {
        Group::of(
            self.ranks
                .iter()
                .copied()
                .filter(|&r| !other.contains(r))
                .collect(),
            self.me,
        )
    }

    /// The rank in `other` of each listed rank of this group, `None` where
    /// the process is not in `other` (`MPI_Group_translate_ranks`).
    pub fn translate_ranks(&self, ranks: &[i32], other: &Group) -> Result<Vec<Option<i32>>> {
        ranks
            .iter()
            .map(|&r| {
                let w = self.world_rank(r)?;
                Ok(other.ranks.iter().position(|&o| o == w).map(|p| p as i32))
            })
            .collect()
    }

    /// [`Group::translate_ranks`] for one rank.
    pub fn translate_rank(&self, rank: i32, other: &Group) -> Result<Option<i32>> {
        Ok(self.translate_ranks(&[rank], other)?[0])
    }

    /// This group with every world rank (and the caller's) renamed by
    /// `f`: the same processes named in another space of ranks. `None` if
    /// `f` has no name for one of them.
    #[cfg(feature = "mpi")]
    pub(crate) fn renamed(&self, f: impl Fn(i32) -> Option<i32>) -> Option<Group> {
        let ranks = self
            .ranks
            .iter()
            .map(|&r| f(r))
            .collect::<Option<Vec<_>>>()?;
        Some(Group::of(ranks, f(self.me)?))
    }

    /// The arguments of the split that makes a communicator of this group
    /// (`MPI_Comm_create`) from one holding every member: color and key of
    /// the caller, world rank `me`, where `rank_of` gives a world rank's
    /// rank in that communicator. Disjoint groups have distinct lowest
    /// members, so that member's rank is the group's color; a process
    /// outside the group gets no color. [`Error::Group`] for a member
    /// outside the communicator.
    pub(crate) fn split_args(
        &self,
        me: i32,
        rank_of: impl Fn(i32) -> Option<i32>,
    ) -> Result<(Option<u32>, i32)> {
        let mut first: Option<i32> = None;
        for &w in self.ranks.iter() {
            match rank_of(w) {
                Some(r) if r >= 0 => first = Some(first.map_or(r, |f| f.min(r))),
                _ => {
                    return Err(Error::Group {
                        reason: format!("world rank {w} is not in the communicator"),
                    })
                }
            }
        }
        let pos = self.ranks.iter().position(|&w| w == me);
        Ok((
            pos.and(first).map(|f| f as u32),
            pos.map_or(0, |p| p as i32),
        ))
    }

    /// How this group compares with `other`.
    pub fn compare(&self, other: &Group) -> GroupRelation {
        if self.ranks == other.ranks {
            GroupRelation::Identical
        } else if self.ranks.len() == other.ranks.len()
            && self.ranks.iter().all(|&r| other.contains(r))
        {
            GroupRelation::Similar
        } else {
            GroupRelation::Unequal
        }
    }
}

/// A group of the node's engine (world ranks of this node's heap, what a
/// node-local communicator holds) as the typed API shows it: by MPI's
/// world rank under an MPI launcher, else itself.
#[inline]
pub(crate) fn shown(g: &Group) -> Group {
    #[cfg(feature = "mpi")]
    if crate::multinode::launched() {
        if let Some(j) = g.renamed(crate::multinode::job_rank_of) {
            return j;
        }
    }
    g.clone()
}

/// A group the typed API was given, for a node-local communicator: as
/// the node's engine names its processes (the reverse of [`shown`]).
/// [`Error::Group`] for a process on another node.
#[inline]
pub(crate) fn on_node(g: &Group) -> Result<Group> {
    #[cfg(feature = "mpi")]
    if crate::multinode::launched() {
        return g.renamed(crate::multinode::node_rank_of).ok_or_else(|| {
            let far = g
                .world_ranks()
                .iter()
                .find(|&&j| crate::multinode::node_rank_of(j).is_none());
            Error::Group {
                reason: format!(
                    "world rank {} is not on this node: a node-local communicator holds only \
                     its node's processes",
                    far.copied().unwrap_or(-1)
                ),
            }
        });
    }
    Ok(g.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations() {
        let g = Group::from_world_ranks(vec![3, 1, 2, 0], 1).unwrap();
        assert_eq!(g.rank(), Some(1));
        assert_eq!(g.size(), 4);
        assert!(matches!(
            g.incl(&[4]),
            Err(Error::Rank { rank: 4, size: 4 })
        ));
        assert!(matches!(g.excl(&[-1]), Err(Error::Rank { .. })));
        assert!(matches!(g.excl(&[2, 2]), Err(Error::Group { .. })));
        let h = g.incl(&[3, 2]).unwrap();
        assert_eq!(h.world_ranks(), &[0, 2]);
        assert_eq!(h.rank(), None);
        assert_eq!(g.compare(&g.clone()), GroupRelation::Identical);
        let s = Group::from_world_ranks(vec![0, 1, 2, 3], 1).unwrap();
        assert_eq!(g.compare(&s), GroupRelation::Similar);
        assert_eq!(g.compare(&h), GroupRelation::Unequal);
        assert_eq!(
            g.translate_ranks(&[0, 3], &s).unwrap(),
            vec![Some(3), Some(0)]
        );
        assert!(g.translate_rank(9, &s).is_err());
        assert_eq!(Group::empty(0).size(), 0);
    }
}
