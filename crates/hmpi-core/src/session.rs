//! Sessions (MPI 4.0's session model): [`Session`], a handle on the
//! runtime that needs no [`crate::init`], with its process sets and the
//! communicators built from their groups.
//!
//! A session holds the runtime as the world model's [`crate::Universe`]
//! does (see [`crate::environment`]): the first holder of a process starts
//! it, the last one ends it. Its process sets are MPI's two:
//! `mpi://WORLD` (every rank of the job) and `mpi://SELF` (this process).
//! A communicator is made from a group of them with a string tag
//! ([`Session::comm_from_group`], `MPI_Comm_create_from_group`),
//! collectively over the group's members only; the tag tells apart
//! concurrent creations (it is hashed into the tag of the creation's
//! internal messages, on the runtime's world context, so two concurrent
//! creations over overlapping groups need tags of different hashes).
//!
//! # Example
//! ```
//! use hmpi_core::session::Session;
//! use hmpi_core::traits::*;
//!
//! let s = Session::init().unwrap();
//! assert_eq!(Session::pset_names(), ["mpi://WORLD", "mpi://SELF"]);
//! let g = s.group_from_pset("mpi://WORLD").unwrap();
//! let world = s.comm_from_group(&g, "example.world").unwrap();
//! assert_eq!(world.size(), g.size());
//! world.barrier().unwrap();
//! s.finalize().unwrap();
//! ```

use crate::buffered::Pool;
use crate::comm::SimpleCommunicator;
use crate::environment::{self, Holder};
use crate::error::{Error, Result};
use crate::group::Group;
use crate::intercomm::{self, InterCommunicator};
use crate::raw;
use std::sync::Arc;

/// The process sets every session knows.
pub const PSETS: [&str; 2] = ["mpi://WORLD", "mpi://SELF"];

/// A session (`MPI_Session`): a hold on the runtime, ended by
/// [`Session::finalize`] or by dropping it. Not `Clone`: each is one hold.
#[derive(Debug)]
pub struct Session {
    world: SimpleCommunicator,
    /// The session's buffer for buffered sends.
    buffer: Arc<Pool>,
    /// Whether the hold is still to be released (by drop).
    held: bool,
}

impl Session {
    /// Opens a session (`MPI_Session_init`): starts the runtime if no
    /// holder of this process did (collective over the job then, as
    /// [`crate::init`]). [`Error::Finalized`] once the runtime has ended.
    pub fn init() -> Result<Session> {
        Ok(Session {
            world: environment::open_session()?,
            buffer: Arc::new(Pool::new()),
            held: true,
        })
    }

    /// The names of the process sets (`MPI_Session_get_nth_pset`).
    pub fn pset_names() -> &'static [&'static str] {
        &PSETS
    }

    /// Which of [`PSETS`] `name` is (the URI's case does not matter);
    /// [`Error::Arg`] for another name.
    fn pset_index(name: &str) -> Result<usize> {
        PSETS
            .iter()
            .position(|p| p.eq_ignore_ascii_case(name))
            .ok_or_else(|| Error::Arg {
                reason: format!(
                    "no process set is named {name:?} (there are {})",
                    PSETS.join(" and ")
                ),
            })
    }

    /// The group of a process set (`MPI_Group_from_session_pset`).
    pub fn group_from_pset(&self, name: &str) -> Result<Group> {
        let me = self.world.world_rank_of_me();
        match Self::pset_index(name)? {
            0 => Group::from_world_ranks(self.world.local_world_ranks().to_vec(), me),
            _ => Group::from_world_ranks(vec![me], me),
        }
    }

    /// The number of processes of a process set (its `mpi_size`,
    /// `MPI_Session_get_pset_info`).
    pub fn pset_size(&self, name: &str) -> Result<i32> {
        Ok(self.group_from_pset(name)?.size())
    }

    /// A communicator of the members of `group` ([`comm_from_group`]);
    /// buffered sends on it without a buffer of its own use this
    /// session's ([`Session::attach_buffer`]).
    pub fn comm_from_group(&self, group: &Group, tag: &str) -> Result<SimpleCommunicator> {
        let c = create_from_group(&self.world, group, tag)?;
        c.bsend_pool().set_session(self.buffer.clone());
        Ok(c)
    }

    /// An intercommunicator between `local` and `remote`
    /// ([`intercomm_from_groups`]).
    pub fn intercomm_from_groups(
        &self,
        local: &Group,
        local_leader: i32,
        remote: &Group,
        remote_leader: i32,
        tag: &str,
    ) -> Result<InterCommunicator> {
        create_intercomm(&self.world, local, local_leader, remote, remote_leader, tag)
    }

    /// Attaches the session's buffer for buffered sends
    /// (`MPI_Session_attach_buffer`): the communicators made from its
    /// groups that have no buffer of their own take their capacity from it.
    ///
    /// # Safety
    /// As for [`crate::buffered::attach`], until
    /// [`Session::detach_buffer`] returns it.
    pub unsafe fn attach_buffer(&self, base: *mut u8, size: usize) -> Result<()> {
        // SAFETY: the caller's guarantee.
        unsafe { self.buffer.attach(base, size) }
    }

    /// Waits for the session buffer's messages to go, then detaches it
    /// (`MPI_Session_detach_buffer`): its address and size.
    pub fn detach_buffer(&self) -> Result<(*mut u8, usize)> {
        self.buffer.detach()
    }

    /// Waits until the session buffer's messages have gone
    /// (`MPI_Session_flush_buffer`).
    pub fn flush_buffer(&self) -> Result<()> {
        self.buffer.flush()
    }

    /// Ends the session (`MPI_Session_finalize`); the runtime ends with
    /// its last holder (a barrier over the job first, whose error this
    /// returns).
    pub fn finalize(mut self) -> Result<()> {
        self.held = false;
        environment::release(Holder::Session)
    }
}

/// A communicator of the members of `group` (`MPI_Comm_create_from_group`),
/// collective over them; every member passes the same group and `tag`.
/// [`Error::Group`] when this process is not a member. Needs the runtime
/// (a session, or [`crate::init`]).
pub fn comm_from_group(group: &Group, tag: &str) -> Result<SimpleCommunicator> {
    create_from_group(&environment::runtime_world()?, group, tag)
}

fn create_from_group(
    world: &SimpleCommunicator,
    group: &Group,
    tag: &str,
) -> Result<SimpleCommunicator> {
    intercomm::create_group(world, group, tag_of(tag))
}

/// An intercommunicator between `local` (this process's group) and
/// `remote` (`MPI_Intercomm_create_from_groups`), collective over both;
/// the leaders are ranks of their groups, and the groups are disjoint.
/// Needs the runtime (a session, or [`crate::init`]).
pub fn intercomm_from_groups(
    local: &Group,
    local_leader: i32,
    remote: &Group,
    remote_leader: i32,
    tag: &str,
) -> Result<InterCommunicator> {
    let world = environment::runtime_world()?;
    create_intercomm(&world, local, local_leader, remote, remote_leader, tag)
}

fn create_intercomm(
    world: &SimpleCommunicator,
    local: &Group,
    local_leader: i32,
    remote: &Group,
    remote_leader: i32,
    tag: &str,
) -> Result<InterCommunicator> {
    if local.rank().is_none() {
        return Err(Error::Group {
            reason: "this process is not in the local group".into(),
        });
    }
    if remote
        .world_ranks()
        .iter()
        .any(|w| local.world_ranks().contains(w))
    {
        return Err(Error::Group {
            reason: "the groups of an intercommunicator must be disjoint".into(),
        });
    }
    let remote_world = remote.world_rank(remote_leader)?;
    // A private communicator of both groups (ordered by world rank, so
    // that both sides name the same group) carries the leaders' talk, so
    // no message of it can match a program's receive.
    let mut both: Vec<i32> = local
        .world_ranks()
        .iter()
        .chain(remote.world_ranks())
        .copied()
        .collect();
    both.sort_unstable();
    let me = world.world_rank_of_me();
    let peer = create_from_group(world, &Group::from_world_ranks(both, me)?, tag)?;
    let local_comm = intercomm::create_group(&peer, local, 0)?;
    let leader_in_peer = peer.rank_of_world(remote_world).ok_or(Error::Rank {
        rank: remote_leader,
        size: remote.size(),
    })?;
    intercomm::intercomm_create(&local_comm, local_leader, Some(&peer), leader_in_peer, 0)
}

impl Drop for Session {
    fn drop(&mut self) {
        // Errors cannot be reported from drop (use `finalize` to see them).
        if self.held {
            let _ = environment::release(Holder::Session);
        }
    }
}

/// The internal tag of a string tag: its FNV-1a hash, within the tags a
/// send may use.
fn tag_of(tag: &str) -> i32 {
    let h = tag.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    (h % (raw::TAG_UB as u32 + 1)) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_tags_become_send_tags() {
        for t in ["", "a", "b", "org.example.solver", &"x".repeat(1000)] {
            assert!(raw::check_send_tag(tag_of(t)).is_ok(), "{t:?}");
        }
        assert_ne!(tag_of("a"), tag_of("b"));
        assert_eq!(tag_of("same"), tag_of("same"));
    }

    #[test]
    fn pset_names_are_checked() {
        assert_eq!(Session::pset_index("mpi://WORLD").unwrap(), 0);
        assert_eq!(Session::pset_index("MPI://self").unwrap(), 1);
        assert!(matches!(
            Session::pset_index("mpi://nodes"),
            Err(Error::Arg { .. })
        ));
    }
}
