//! rsmpi's `mpi::topology`: communicators, processes and groups.

use hmpi_core::traits::Communicator as _;

pub use hmpi_core::point_to_point::{AnyProcess, Process};

/// A process's rank in a communicator or group.
pub type Rank = i32;

/// The traits of this module (in `mpi::traits`).
pub mod traits {
    pub use super::{AsCommunicator, Communicator, Group};
}

/// A communicator (`MPI_Comm`): what rsmpi's `SimpleCommunicator` is.
#[derive(Debug)]
pub struct SimpleCommunicator(pub(crate) hmpi_core::SimpleCommunicator);

impl SimpleCommunicator {
    /// `MPI_COMM_WORLD`.
    pub fn world() -> SimpleCommunicator {
        SimpleCommunicator(crate::check(hmpi_core::SimpleCommunicator::world()))
    }

    /// `MPI_COMM_SELF`.
    pub fn self_comm() -> SimpleCommunicator {
        SimpleCommunicator(crate::check(hmpi_core::SimpleCommunicator::self_comm()))
    }
}

/// A split colour: a value, or `MPI_UNDEFINED` (the process is in no part).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Color(Option<u32>);

impl Color {
    /// `MPI_UNDEFINED`.
    pub fn undefined() -> Color {
        Color(None)
    }

    /// A defined colour; a negative `value` aborts (MPI's colours are
    /// non-negative).
    #[track_caller]
    pub fn with_value(value: i32) -> Color {
        match u32::try_from(value) {
            Ok(v) => Color(Some(v)),
            Err(_) => crate::fatal(&hmpi_core::Error::Arg {
                reason: format!("a colour must be non-negative, not {value}"),
            }),
        }
    }
}

/// A split key (orders the ranks of a part).
pub type Key = i32;

/// How two communicators relate (`MPI_Comm_compare`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CommunicatorRelation {
    /// The same communicator.
    Identical,
    /// Same members in the same order, another context.
    Congruent,
    /// Same members in another order.
    Similar,
    /// Anything else.
    Unequal,
}

/// Something that has a communicator (rsmpi's `AsCommunicator`).
pub trait AsCommunicator {
    /// The communicator's type.
    type Out: Communicator;
    /// The communicator.
    fn as_communicator(&self) -> &Self::Out;
}

impl AsCommunicator for SimpleCommunicator {
    type Out = SimpleCommunicator;
    fn as_communicator(&self) -> &SimpleCommunicator {
        self
    }
}

/// rsmpi's `Communicator`: the operations of every communicator.
pub trait Communicator {
    /// The hmpi-core communicator underneath (not part of rsmpi's API).
    #[doc(hidden)]
    fn core(&self) -> &hmpi_core::SimpleCommunicator;

    /// The number of processes (the remote group's for an
    /// intercommunicator, as `MPI_Comm_remote_size`).
    fn target_size(&self) -> Rank {
        self.core().size()
    }

    /// The number of processes.
    fn size(&self) -> Rank {
        self.core().size()
    }

    /// This process's rank.
    fn rank(&self) -> Rank {
        self.core().rank()
    }

    /// The process of rank `r` (checked when used).
    fn process_at_rank(&self, r: Rank) -> Process<'_> {
        self.core().process_at_rank(r)
    }

    /// A receive source that matches any process.
    fn any_process(&self) -> AnyProcess<'_> {
        self.core().any_process()
    }

    /// This process.
    fn this_process(&self) -> Process<'_> {
        self.core().this_process()
    }

    /// How this communicator relates to `other`.
    fn compare(&self, other: &dyn Communicator) -> CommunicatorRelation {
        let (a, b) = (self.core(), other.core());
        if a.same_as(b) {
            return CommunicatorRelation::Identical;
        }
        match a.group().compare(&b.group()) {
            hmpi_core::GroupRelation::Identical => CommunicatorRelation::Congruent,
            hmpi_core::GroupRelation::Similar => CommunicatorRelation::Similar,
            hmpi_core::GroupRelation::Unequal => CommunicatorRelation::Unequal,
        }
    }

    /// `MPI_Comm_dup`.
    fn duplicate(&self) -> SimpleCommunicator {
        SimpleCommunicator(crate::check(self.core().duplicate()))
    }

    /// `MPI_Comm_split` with the rank as key.
    fn split_by_color(&self, color: Color) -> Option<SimpleCommunicator> {
        crate::check(self.core().split_by_color(color.0)).map(SimpleCommunicator)
    }

    /// `MPI_Comm_split`.
    fn split_by_color_with_key(&self, color: Color, key: Key) -> Option<SimpleCommunicator> {
        crate::check(self.core().split_by_color_with_key(color.0, key)).map(SimpleCommunicator)
    }

    /// `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`.
    fn split_shared(&self, key: i32) -> SimpleCommunicator {
        SimpleCommunicator(crate::check(self.core().split_shared(key)))
    }

    /// `MPI_Comm_create`: the members of `group` get a communicator.
    fn split_by_subgroup_collective(&self, group: &dyn Group) -> Option<SimpleCommunicator> {
        crate::check(self.core().split_by_subgroup_collective(group.core())).map(SimpleCommunicator)
    }

    /// `MPI_Comm_group`.
    fn group(&self) -> UserGroup {
        UserGroup(self.core().group())
    }

    /// `MPI_Abort`.
    fn abort(&self, errorcode: i32) -> ! {
        self.core().abort(errorcode)
    }

    /// Whether this is an intercommunicator.
    fn test_inter(&self) -> bool {
        self.core().is_inter()
    }
}

impl Communicator for SimpleCommunicator {
    fn core(&self) -> &hmpi_core::SimpleCommunicator {
        &self.0
    }
}

impl<C: Communicator + ?Sized> Communicator for &C {
    fn core(&self) -> &hmpi_core::SimpleCommunicator {
        (**self).core()
    }
}

/// A group of processes (`MPI_Group`), rsmpi's `UserGroup`.
#[derive(Clone, Debug)]
pub struct UserGroup(pub(crate) hmpi_core::Group);

/// How two groups relate (`MPI_Group_compare`).
pub use hmpi_core::GroupRelation;

/// rsmpi's `Group`: the operations of a group.
pub trait Group {
    /// The hmpi-core group underneath (not part of rsmpi's API).
    #[doc(hidden)]
    fn core(&self) -> &hmpi_core::Group;

    /// `MPI_Group_union`.
    fn union(&self, other: &dyn Group) -> UserGroup {
        UserGroup(self.core().union(other.core()))
    }

    /// `MPI_Group_intersection`.
    fn intersection(&self, other: &dyn Group) -> UserGroup {
        UserGroup(self.core().intersection(other.core()))
    }

    /// `MPI_Group_difference`.
    fn difference(&self, other: &dyn Group) -> UserGroup {
        UserGroup(self.core().difference(other.core()))
    }

    /// `MPI_Group_incl`.
    fn include(&self, ranks: &[Rank]) -> UserGroup {
        UserGroup(crate::check(self.core().include(ranks)))
    }

    /// `MPI_Group_excl`.
    fn exclude(&self, ranks: &[Rank]) -> UserGroup {
        UserGroup(crate::check(self.core().exclude(ranks)))
    }

    /// The number of processes.
    fn size(&self) -> Rank {
        self.core().size()
    }

    /// This process's rank, `None` if not a member.
    fn rank(&self) -> Option<Rank> {
        self.core().rank()
    }

    /// The rank in `other` of the process of rank `rank` here.
    fn translate_rank(&self, rank: Rank, other: &dyn Group) -> Option<Rank> {
        crate::check(self.core().translate_rank(rank, other.core()))
    }

    /// [`Group::translate_rank`] for several ranks.
    fn translate_ranks(&self, ranks: &[Rank], other: &dyn Group) -> Vec<Option<Rank>> {
        crate::check(self.core().translate_ranks(ranks, other.core()))
    }

    /// `MPI_Group_compare`.
    fn compare(&self, other: &dyn Group) -> GroupRelation {
        self.core().compare(other.core())
    }
}

impl Group for UserGroup {
    fn core(&self) -> &hmpi_core::Group {
        &self.0
    }
}
