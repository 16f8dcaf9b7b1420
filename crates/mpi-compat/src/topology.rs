//! rsmpi's `mpi::topology`: communicators, processes and groups.

use crate::attribute::CommAttribute;
use hmpi_core::traits::Communicator as _;

pub use hmpi_core::point_to_point::{AnyProcess, Process};

/// A process's rank in a communicator or group.
pub type Rank = i32;

/// The traits of this module (in `mpi::traits`).
pub mod traits {
    pub use super::{AnyCommunicator, AsCommunicator, Communicator, Group};
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

/// A byte count as MPI's `int`; aborts past `i32::MAX`.
fn count_of(n: usize) -> crate::Count {
    crate::Count::try_from(n).unwrap_or_else(|_| {
        crate::fatal(&hmpi_core::Error::Arg {
            reason: format!("{n} bytes do not fit MPI's int counts"),
        })
    })
}

/// A pack position inside a buffer of `len` bytes.
fn position_in(position: crate::Count, len: usize) -> usize {
    match usize::try_from(position) {
        Ok(p) if p <= len => p,
        _ => crate::fatal(&hmpi_core::Error::Arg {
            reason: format!("position {position} is outside the buffer of {len} bytes"),
        }),
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
        use hmpi_core::intercomm::CommRelation;
        match hmpi_core::intercomm::compare(self.core(), other.core()) {
            CommRelation::Identical => CommunicatorRelation::Identical,
            CommRelation::Congruent => CommunicatorRelation::Congruent,
            CommRelation::Similar => CommunicatorRelation::Similar,
            CommRelation::Unequal => CommunicatorRelation::Unequal,
        }
    }

    /// `MPI_Comm_dup`.
    fn duplicate(&self) -> SimpleCommunicator {
        let dup = crate::check(self.core().duplicate());
        crate::attribute::copy(self.core().attributes(), dup.attributes());
        SimpleCommunicator(dup)
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

    /// `MPI_Comm_create_group` (collective over the members of `group`
    /// only); `None` on a process outside `group`.
    fn split_by_subgroup(&self, group: &dyn Group) -> Option<SimpleCommunicator> {
        self.split_by_subgroup_with_tag(group, 0)
    }

    /// [`Communicator::split_by_subgroup`] with a tag that tells
    /// concurrent creations apart.
    fn split_by_subgroup_with_tag(
        &self,
        group: &dyn Group,
        tag: crate::Tag,
    ) -> Option<SimpleCommunicator> {
        group.core().rank()?;
        Some(SimpleCommunicator(crate::check(
            hmpi_core::intercomm::create_group(self.core(), group.core(), tag),
        )))
    }

    /// `MPI_Comm_group`.
    fn group(&self) -> UserGroup {
        UserGroup(self.core().group())
    }

    /// `MPI_Abort`.
    fn abort(&self, errorcode: i32) -> ! {
        self.core().abort(errorcode)
    }

    /// Names the communicator (`MPI_Comm_set_name`): at most
    /// `MPI_MAX_OBJECT_NAME - 1` (127) bytes are kept. A name with a NUL
    /// byte aborts (rsmpi panics on it).
    fn set_name(&self, name: &str) {
        crate::check(self.core().set_name(name))
    }

    /// The communicator's name (`MPI_Comm_get_name`): what `set_name`
    /// gave it, else `MPI_COMM_WORLD` / `MPI_COMM_SELF` for those and the
    /// empty string for others.
    fn get_name(&self) -> String {
        self.core().name()
    }

    /// Whether this is an intercommunicator.
    fn test_inter(&self) -> bool {
        self.core().is_inter()
    }

    /// The intercommunicator to the processes that spawned this one
    /// (`MPI_Comm_get_parent`): `None`, as hmpi's ranks are the processes
    /// the launcher started.
    fn parent(&self) -> Option<InterCommunicator> {
        None
    }

    /// `MPI_Cart_create`: a grid of `dims`, periodic where `periods` says;
    /// `None` on the members left out of the grid.
    fn create_cartesian_communicator(
        &self,
        dims: &[crate::Count],
        periods: &[bool],
        reorder: bool,
    ) -> Option<CartesianCommunicator> {
        use hmpi_core::traits::TopologyCommunicator as _;
        crate::check(
            self.core()
                .create_cartesian_communicator(dims, periods, reorder),
        )
        .map(CartesianCommunicator)
    }

    /// The bytes `incount` elements of `datatype` take packed
    /// (`MPI_Pack_size`).
    fn pack_size<D: crate::datatype::UncommittedDatatype + ?Sized>(
        &self,
        incount: crate::Count,
        datatype: &D,
    ) -> crate::Count
    where
        Self: Sized,
    {
        let n = usize::try_from(incount).unwrap_or_else(|_| {
            crate::fatal(&hmpi_core::Error::Arg {
                reason: format!("a count must not be negative, not {incount}"),
            })
        });
        count_of(crate::check(datatype.core_datatype().packed_size(n)))
    }

    /// `inbuf` packed (`MPI_Pack`).
    fn pack<Buf: crate::datatype::Buffer + ?Sized>(&self, inbuf: &Buf) -> Vec<u8>
    where
        Self: Sized,
    {
        let mut out = vec![0u8; crate::datatype::packed_len(inbuf)];
        let used = crate::datatype::pack_buf(inbuf, &mut out);
        out.truncate(used);
        out
    }

    /// Packs `inbuf` into `outbuf` from byte `position`; the position
    /// after it (`MPI_Pack`).
    fn pack_into<Buf: crate::datatype::Buffer + ?Sized>(
        &self,
        inbuf: &Buf,
        outbuf: &mut [u8],
        position: crate::Count,
    ) -> crate::Count
    where
        Self: Sized,
    {
        let at = position_in(position, outbuf.len());
        let used = crate::datatype::pack_buf(inbuf, &mut outbuf[at..]);
        count_of(at + used)
    }

    /// Unpacks `inbuf` from byte `position` into `outbuf`; the position
    /// after what was read (`MPI_Unpack`).
    ///
    /// # Safety
    /// As in rsmpi's signature; hmpi checks the lengths, and every byte
    /// pattern is a valid `Equivalence` value.
    unsafe fn unpack_into<Buf: crate::datatype::BufferMut + ?Sized>(
        &self,
        inbuf: &[u8],
        outbuf: &mut Buf,
        position: crate::Count,
    ) -> crate::Count
    where
        Self: Sized,
    {
        let at = position_in(position, inbuf.len());
        let used = crate::datatype::unpack_buf(&inbuf[at..], outbuf);
        count_of(at + used)
    }

    /// `MPI_Cart_map`: this process's rank in a grid of `dims`, `None` if
    /// it is outside the grid.
    fn cartesian_map(&self, dims: &[crate::Count], periods: &[bool]) -> Option<Rank> {
        crate::check(hmpi_core::topology::cart_map(self.core(), dims, periods))
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

/// Attribute access on any communicator, also through `dyn Communicator`
/// (rsmpi's `AnyCommunicator`).
pub trait AnyCommunicator {
    /// The value of type `A` cached on the communicator
    /// (`MPI_Comm_get_attr`), `None` if none is.
    fn get_attr<A: CommAttribute>(&self) -> Option<&A>;

    /// Caches `val` on the communicator (`MPI_Comm_set_attr`); an `A`
    /// cached before is dropped when the communicator goes.
    fn set_attr<A: CommAttribute>(&mut self, val: A);
}

impl<C: ?Sized + Communicator> AnyCommunicator for C {
    fn get_attr<A: CommAttribute>(&self) -> Option<&A> {
        crate::attribute::get(self.core().attributes())
    }

    fn set_attr<A: CommAttribute>(&mut self, val: A) {
        crate::attribute::set(self.core().attributes(), val)
    }
}

pub use hmpi_core::topology::CartesianLayout;

/// Which group comes first in a merged intercommunicator
/// (`MPI_Intercomm_merge`'s `high`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MergeOrder {
    /// This group's ranks come first.
    Low,
    /// This group's ranks come last.
    High,
}

/// An intercommunicator (rsmpi's `InterCommunicator`): point-to-point
/// ranks name the remote group.
#[derive(Debug)]
pub struct InterCommunicator(hmpi_core::InterCommunicator);

impl AsCommunicator for InterCommunicator {
    type Out = InterCommunicator;
    fn as_communicator(&self) -> &InterCommunicator {
        self
    }
}

impl Communicator for InterCommunicator {
    fn core(&self) -> &hmpi_core::SimpleCommunicator {
        self.0.as_simple()
    }

    fn target_size(&self) -> Rank {
        self.0.remote_size()
    }
}

impl InterCommunicator {
    /// The size of the remote group.
    pub fn remote_size(&self) -> Rank {
        self.0.remote_size()
    }

    /// The remote group.
    pub fn remote_group(&self) -> UserGroup {
        UserGroup(self.0.remote_group())
    }

    /// `MPI_Intercomm_merge`: one intracommunicator of both groups.
    pub fn merge(&self, order: MergeOrder) -> SimpleCommunicator {
        SimpleCommunicator(crate::check(self.0.merge(order == MergeOrder::High)))
    }
}

/// A communicator with a Cartesian topology (rsmpi's
/// `CartesianCommunicator`).
#[derive(Debug)]
pub struct CartesianCommunicator(hmpi_core::topology::CartesianCommunicator);

impl AsCommunicator for CartesianCommunicator {
    type Out = CartesianCommunicator;
    fn as_communicator(&self) -> &CartesianCommunicator {
        self
    }
}

impl Communicator for CartesianCommunicator {
    fn core(&self) -> &hmpi_core::SimpleCommunicator {
        self.0.as_simple()
    }
}

impl CartesianCommunicator {
    /// The number of dimensions (`MPI_Cartdim_get`).
    pub fn num_dimensions(&self) -> crate::Count {
        self.0.num_dimensions()
    }

    /// The grid and this process's coordinates (`MPI_Cart_get`).
    pub fn get_layout(&self) -> CartesianLayout {
        self.0.get_layout()
    }

    /// The coordinates of `rank` (`MPI_Cart_coords`).
    pub fn rank_to_coordinates(&self, rank: Rank) -> Vec<crate::Count> {
        crate::check(self.0.rank_to_coordinates(rank))
    }

    /// The rank at `coords` (`MPI_Cart_rank`).
    pub fn coordinates_to_rank(&self, coords: &[crate::Count]) -> Rank {
        crate::check(self.0.coordinates_to_rank(coords))
    }

    /// The source and destination of a shift by `displacement` along
    /// `dimension` (`MPI_Cart_shift`); `None` past a non-periodic edge.
    pub fn shift(
        &self,
        dimension: crate::Count,
        displacement: crate::Count,
    ) -> (Option<Rank>, Option<Rank>) {
        crate::check(self.0.shift(dimension, displacement))
    }

    /// The sub-grids that keep the dimensions `retain` marks
    /// (`MPI_Cart_sub`).
    pub fn subgroup(&self, retain: &[bool]) -> CartesianCommunicator {
        CartesianCommunicator(crate::check(self.0.subgroup(retain)))
    }
}

/// A group of processes (`MPI_Group`), rsmpi's `UserGroup`.
#[derive(Clone, Debug)]
pub struct UserGroup(pub(crate) hmpi_core::Group);

/// How two groups relate (`MPI_Group_compare`).
pub use hmpi_core::GroupRelation;

/// MPI's predefined groups (rsmpi's `SystemGroup`).
#[derive(Clone, Debug)]
pub struct SystemGroup(hmpi_core::Group);

impl SystemGroup {
    /// `MPI_GROUP_EMPTY`.
    pub fn empty() -> SystemGroup {
        // The group remembers the caller (by world rank) for the groups
        // made from it; before init there is none.
        let me = hmpi_core::SimpleCommunicator::self_comm()
            .ok()
            .and_then(|c| c.world_ranks().first().copied())
            .unwrap_or(-1);
        SystemGroup(hmpi_core::Group::empty(me))
    }
}

impl Group for SystemGroup {
    fn core(&self) -> &hmpi_core::Group {
        &self.0
    }
}

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
