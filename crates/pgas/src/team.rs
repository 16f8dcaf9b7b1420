//! Units and teams.
//!
//! A unit is a rank; its absolute id is its rank in the job's world. A
//! [`Team`] is an ordered set of units with a communicator of its own:
//! the team of all units, or a team made from a communicator
//! ([`crate::Pgas::team_from_comm`]) or from a group of a parent team's
//! units ([`crate::Pgas::team_create`], teams of teams). Unit ids are
//! relative to a team ([`Team::myid`], [`Team::unit_to_world`],
//! [`Team::world_to_unit`]).
//!
//! Every team has an **id**, never reused in the job (drawn from one
//! counter in the node heap), and an **index** in the bounded team table
//! of each member ([`MAX_TEAMS`] slots). A global pointer carries the
//! index of its segment's team, so the members agree on it: each member
//! offers its free indices, the new team's first unit picks the one on
//! top of its own free-index stack that is free at every member (the
//! lowest common one otherwise), and a destroyed team's index goes back
//! on top of each member's stack.

use crate::error::{team_err, Error, Result};
use hmpi_core::comm::SimpleCommunicator;
use hmpi_core::datatype::{Buffer, BufferMut};
use hmpi_core::op::Operation;
use hmpi_core::traits::{Communicator, CommunicatorCollectives, Root};
use hmpi_core::Group;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Slots of the team table (`DART_MAX_TEAM_NUMBER`).
pub const MAX_TEAMS: usize = 256;

/// The 64-bit words of a bitmap of the table's slots.
pub(crate) const MAP_WORDS: usize = MAX_TEAMS / 64;

#[derive(Debug)]
pub(crate) struct TeamInner {
    pub(crate) id: u64,
    pub(crate) index: u16,
    pub(crate) comm: SimpleCommunicator,
    /// Team-relative unit → absolute unit.
    pub(crate) units: Vec<u32>,
    /// Absolute unit → team-relative unit.
    pub(crate) of_unit: HashMap<u32, u32>,
    /// This unit's team-relative id.
    pub(crate) me: u32,
    pub(crate) destroyed: AtomicBool,
}

/// A team: a handle on a slot of the team table (cheap to clone).
#[derive(Debug, Clone)]
pub struct Team(pub(crate) Arc<TeamInner>);

impl Team {
    pub(crate) fn new(id: u64, index: u16, comm: SimpleCommunicator) -> Team {
        // The group names units by their rank in the job's world (MPI's
        // under an MPI launcher, when the team spans nodes too).
        let units: Vec<u32> = comm
            .group()
            .world_ranks()
            .iter()
            .map(|&w| w as u32)
            .collect();
        let of_unit = units
            .iter()
            .enumerate()
            .map(|(r, &u)| (u, r as u32))
            .collect();
        let me = comm.rank() as u32;
        Team(Arc::new(TeamInner {
            id,
            index,
            comm,
            units,
            of_unit,
            me,
            destroyed: AtomicBool::new(false),
        }))
    }

    /// The team's id (0 for the team of all units; never reused).
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// The team's index in the team table (what global pointers carry).
    pub fn index(&self) -> u16 {
        self.0.index
    }

    /// This unit's id relative to the team.
    pub fn myid(&self) -> u32 {
        self.0.me
    }

    /// The number of units.
    pub fn size(&self) -> u32 {
        self.0.units.len() as u32
    }

    /// The absolute ids of the team's units, in team order.
    pub fn units(&self) -> &[u32] {
        &self.0.units
    }

    /// The absolute id of the team's unit `unit`.
    pub fn unit_to_world(&self, unit: u32) -> Result<u32> {
        self.0
            .units
            .get(unit as usize)
            .copied()
            .ok_or_else(|| Error::Unit {
                unit,
                what: format!("team {} ({} units)", self.id(), self.size()),
            })
    }

    /// The team-relative id of the absolute unit `world`.
    pub fn world_to_unit(&self, world: u32) -> Result<u32> {
        self.0
            .of_unit
            .get(&world)
            .copied()
            .ok_or_else(|| Error::Unit {
                unit: world,
                what: format!("team {}", self.id()),
            })
    }

    /// The team's units as a group.
    pub fn group(&self) -> Group {
        self.0.comm.group()
    }

    /// The team's communicator: every collective of the runtime works on
    /// it (`team.comm().all_reduce_into(…)`).
    pub fn comm(&self) -> &SimpleCommunicator {
        &self.0.comm
    }

    /// Whether the team was destroyed.
    pub fn is_destroyed(&self) -> bool {
        // Acquire: pairs with the Release of `destroy` (a flag only; the
        // state it guards is this unit's own).
        self.0.destroyed.load(Ordering::Acquire)
    }

    pub(crate) fn check(&self) -> Result<()> {
        if self.is_destroyed() {
            return Err(team_err(format!("team {} has been destroyed", self.id())));
        }
        Ok(())
    }

    /// Waits until every unit of the team has called it
    /// (`dart_barrier`).
    pub fn barrier(&self) -> Result<()> {
        self.check()?;
        Ok(self.0.comm.barrier()?)
    }

    /// Unit `root`'s `buf` into every unit's (`dart_bcast`).
    pub fn broadcast_into<B: ?Sized + BufferMut>(&self, root: u32, buf: &mut B) -> Result<()> {
        self.check()?;
        let r = i32::try_from(root)
            .ok()
            .filter(|&r| r < self.size() as i32)
            .ok_or_else(|| Error::Unit {
                unit: root,
                what: format!("team {}", self.id()),
            })?;
        Ok(self.0.comm.process_at_rank(r).broadcast_into(buf)?)
    }

    /// The reduction of every unit's `send` with `op` into every unit's
    /// `recv` (`dart_allreduce`).
    pub fn all_reduce_into<S, R, O>(&self, send: &S, recv: &mut R, op: O) -> Result<()>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Into<Operation>,
    {
        self.check()?;
        Ok(self.0.comm.all_reduce_into(send, recv, op)?)
    }

    /// Every unit's `send`, in team order, into every unit's `recv`
    /// (`dart_allgather`).
    pub fn all_gather_into<S, R>(&self, send: &S, recv: &mut R) -> Result<()>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        self.check()?;
        Ok(self.0.comm.all_gather_into(send, recv)?)
    }
}

/// One unit's team table: the slots and the free-index stack.
#[derive(Debug)]
pub(crate) struct Table {
    slots: Vec<Option<Team>>,
    /// Free indices, the next to use on top (the end).
    free: Vec<u16>,
}

impl Table {
    /// A table with the team of all units in slot 0.
    pub(crate) fn new(all: Team) -> Table {
        let mut slots = vec![None; MAX_TEAMS];
        slots[0] = Some(all);
        Table {
            slots,
            // Lowest index on top.
            free: (1..MAX_TEAMS as u16).rev().collect(),
        }
    }

    /// The free slots as a bitmap.
    pub(crate) fn free_map(&self) -> [u64; MAP_WORDS] {
        let mut m = [0u64; MAP_WORDS];
        for &i in &self.free {
            m[i as usize / 64] |= 1 << (i % 64);
        }
        m
    }

    /// The index on top of the stack that is free in `common`; the lowest
    /// one of `common` if none of the stack's is.
    pub(crate) fn choose(&self, common: &[u64; MAP_WORDS]) -> Option<u16> {
        let set = |i: u16| common[i as usize / 64] & (1 << (i % 64)) != 0;
        self.free
            .iter()
            .rev()
            .copied()
            .find(|&i| set(i))
            .or_else(|| (1..MAX_TEAMS as u16).find(|&i| set(i)))
    }

    /// Puts `team` in its slot, taking the index off the stack.
    pub(crate) fn place(&mut self, team: Team) -> Result<()> {
        let i = team.index();
        let Some(pos) = self.free.iter().position(|&f| f == i) else {
            return Err(Error::Runtime(hmpi_core::Error::Internal(format!(
                "team slot {i} was taken while the team was made"
            ))));
        };
        self.free.remove(pos);
        self.slots[i as usize] = Some(team);
        Ok(())
    }

    /// Empties the slot of `team`, its index back on top of the stack.
    pub(crate) fn remove(&mut self, team: &Team) {
        let i = team.index();
        if let Some(t) = &self.slots[i as usize] {
            if t.id() == team.id() {
                self.slots[i as usize] = None;
                self.free.push(i);
            }
        }
    }

    /// The team in slot `index`.
    pub(crate) fn get(&self, index: u16) -> Option<&Team> {
        self.slots.get(index as usize).and_then(Option::as_ref)
    }

    /// The teams in the table.
    pub(crate) fn teams(&self) -> impl Iterator<Item = &Team> {
        self.slots.iter().flatten()
    }
}
