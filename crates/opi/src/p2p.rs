//! Point-to-point ownership passing: [`Give`] (on a destination process)
//! and [`Take`] (on a process or `any_process()`), blocking and in a
//! [`request::scope`](hmpi_core::request::scope).
//!
//! `give` moves the value: the sender cannot touch it afterwards (the
//! borrow checker sees to that), and the receiver's `take` returns it —
//! the very same heap block when both sides' global allocator is the node
//! heap, nothing copied. A give is complete at once (the block is the
//! receiver's as soon as it is queued), so it never waits for the taker.
//!
//! Gives and takes are messages like any other: they share the queues and
//! MPI's ordering with two-sided sends and receives of the same
//! communicator, and mix with them — a plain receive of a given value gets
//! a copy of its bytes (and the block is freed), a take of a plain send
//! gets a fresh block holding the payload. Only values that are their
//! bytes ([`Transferable::PLAIN`]) make sense
//! across that border: a *deep* value (a `Box<Vec<u8>>`, say) received by
//! a plain receive delivers the outer value's bytes — addresses, not data —
//! and the blocks it owned stay allocated (the plain receiver cannot drop
//! them). Take deep values, never receive them.
//!
//! Nonblocking: [`Give::immediate_give`] returns an ordinary
//! [`Request`] (complete already on the node; across nodes once MPI has
//! sent the value's bytes); [`Take::immediate_take`] fills a
//! [`TakeSlot`] that the caller keeps and opens after the request
//! completed (after the scope, as for `immediate_receive_into`). Both mix
//! with two-sided requests of the same scope.
//!
//! # Example
//! ```
//! use opi::prelude::*;
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! let me = world.this_process();
//! me.give_with_tag(Box::new([1.5f64; 4]), 3).unwrap();
//! let b = world.any_process().take::<[f64; 4]>().unwrap();
//! assert_eq!(*b, [1.5; 4]);
//!
//! me.give(vec![1u32, 2, 3]).unwrap();
//! me.send(&[7u32, 8][..]).unwrap(); // a plain send, taken below
//! let mut slot = TakeSlot::<Vec<u32>>::new();
//! hmpi_core::request::scope(|scope| {
//!     let r = me.immediate_take(scope, &mut slot).unwrap();
//!     r.wait().unwrap();
//! });
//! assert_eq!(slot.into_inner().unwrap(), Some(vec![1, 2, 3]));
//! assert_eq!(me.take_vec::<u32>().unwrap(), [7, 8]);
//! ```
//!
//! What was given cannot be touched any more — the compiler refuses:
//! ```compile_fail,E0382
//! use opi::prelude::*;
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! let v = vec![1u8, 2, 3];
//! world.this_process().give(v).unwrap();
//! println!("{}", v.len()); // `v` moved into the give
//! ```

use crate::error::GiveError;
use crate::givable::Givable;
use crate::pool::OpiBuf;
use crate::transfer::Transferable;
use hmpi_core::raw::{self, OwnedBlock, Traffic};
use hmpi_core::request::{Request, Scope};
use hmpi_core::traits::{Communicator, Destination, Source};
use hmpi_core::{Error, Result, SimpleCommunicator, Status, ANY_TAG};
use std::marker::PhantomData;

/// A blocking give of `v` to communicator rank `dest` with `tag` in
/// `comm`'s context for `traffic`.
pub(crate) fn give_now<V: Givable>(
    comm: &SimpleCommunicator,
    dest: i32,
    tag: i32,
    traffic: Traffic,
    v: V,
) -> std::result::Result<(), GiveError<V>> {
    give_by(raw::give, comm, dest, tag, traffic, v)
}

/// The raw tier's blocking gives ([`raw::give`], [`raw::give_started`]).
pub(crate) type RawGive =
    unsafe fn(&SimpleCommunicator, Traffic, OwnedBlock, i32, i32) -> Result<()>;

/// `v` given with `give`, checked to stay on the node if it must: with
/// [`raw::give_started`], a give to another node returns once its send
/// has started ([`raw::complete_gives`] waits for it), for collectives
/// whose members all give before they take.
#[inline(always)]
pub(crate) fn give_by<V: Givable>(
    give: RawGive,
    comm: &SimpleCommunicator,
    dest: i32,
    tag: i32,
    traffic: Traffic,
    v: V,
) -> std::result::Result<(), GiveError<V>> {
    give_with(v, |b| {
        stays_on_heap(comm, &b, dest)?;
        // SAFETY: `give_with` passes the value's own block (of the global
        // allocator, or of size 0) and gives it up only if this succeeds;
        // both gives take such a block.
        unsafe { give(comm, traffic, b, dest, tag) }
    })
}

/// [`Error::Arg`] for a value that owns further heap blocks (flag DEEP)
/// given to a rank on another node (a communicator spanning nodes): only
/// its own block's bytes could travel there, not the blocks it points to.
#[inline(always)]
fn stays_on_heap(comm: &SimpleCommunicator, b: &OwnedBlock, dest: i32) -> Result<()> {
    if b.meta[0] & crate::givable::FLAG_DEEP != 0 && !comm.shares_heap_with(dest) {
        return Err(Error::Arg {
            reason: format!(
                "give to rank {dest} on another node: the value owns further heap blocks, \
                 which cannot leave this node's heap"
            ),
        });
    }
    Ok(())
}

/// Turns `v` into its block and hands it to `send` (a give of the block
/// through `hmpi_core::raw`, which checks the destination and tag), which
/// must leave the block untouched when it fails; on failure `v` comes
/// back in the error.
#[inline(always)]
fn give_with<V: Givable, R>(
    v: V,
    send: impl FnOnce(OwnedBlock) -> Result<R>,
) -> std::result::Result<R, GiveError<V>> {
    crate::pool::prepare();
    let block = match v.into_block() {
        Ok(b) => b,
        Err((value, error)) => return Err(GiveError { error, value }),
    };
    // `into_block` handed us the value's block (of the global allocator,
    // or of size 0), which `send` gives up on success; on error it is
    // left untouched and we rebuild the value from it.
    match send(block) {
        Ok(r) => Ok(r),
        Err(error) => Err(GiveError {
            error,
            // SAFETY: the block `into_block` made, still ours.
            value: unsafe { V::restore(block) },
        }),
    }
}

pub(crate) fn take_on<V: Givable>(
    comm: &SimpleCommunicator,
    source: i32,
    tag: i32,
    traffic: Traffic,
) -> Result<(V, Status)> {
    let mut st = raw::Status::empty();
    let v = take_engine::<V>(comm, source, tag, traffic, &mut st)?;
    Ok((v, Status::from_engine(st, None)))
}

/// A take from `from` for a caller that has no use for the status: the
/// value alone, so that no status is translated and none travels back
/// with it. Inlined: returned from a call, the value came back through
/// memory written field by field and was read back at once in wider
/// loads, which store forwarding cannot serve (a stall on every take).
#[inline(always)]
fn take_value<V: Givable, S: Source + ?Sized>(from: &S, tag: i32) -> Result<V> {
    let mut st = raw::Status::empty();
    take_engine::<V>(
        from.comm(),
        from.source_rank(),
        tag,
        Traffic::PointToPoint,
        &mut st,
    )
}

/// A blocking take: the value, with its status (communicator ranks) in
/// `st`.
#[inline(always)]
fn take_engine<V: Givable>(
    comm: &SimpleCommunicator,
    source: i32,
    tag: i32,
    traffic: Traffic,
    st: &mut raw::Status,
) -> Result<V> {
    let mut out = None;
    recv_block_into(comm, source, tag, traffic, V::ALIGN, &mut out, st)?;
    // Read where the engine wrote it, field by field (a copy of the whole
    // block first was made in wide loads, which stall, as above).
    match &out {
        // SAFETY: a block the engine just handed us.
        Some(b) => unsafe { V::from_block(b) },
        None => Err(no_block()),
    }
}

/// The error of a take that finished without a block, which the engine
/// never does on success (a take from `PROC_NULL` is refused first).
#[cold]
pub(crate) fn no_block() -> Error {
    Error::Internal("a take finished without a block".into())
}

/// A blocking receive of a block (of `align`) from communicator rank
/// `source` with `tag` into `out`, where it stays as the engine wrote it,
/// with its status (communicator ranks) in `st`. What typed and raw takes
/// share; a take from `PROC_NULL` is refused ([`raw::recv_owned_into`]),
/// so on success the engine delivered a block. (The status goes out
/// through `st`, not in the `Result`: so returned, it cost the typed take
/// some 10 instructions more.)
#[inline(always)]
pub(crate) fn recv_block_into(
    comm: &SimpleCommunicator,
    source: i32,
    tag: i32,
    traffic: Traffic,
    align: usize,
    out: &mut Option<OwnedBlock>,
    st: &mut raw::Status,
) -> Result<()> {
    raw::recv_owned_into(comm, traffic, out, align, source, tag, st)
}

/// Giving ownership to a destination (implemented for every
/// [`Destination`], i.e. `process_at_rank(r)`).
pub trait Give: Destination {
    /// Gives `v` with `tag` (`OPI_Give`): the value moves to the
    /// destination, which takes it. Complete when this returns. On error the
    /// value comes back in the [`GiveError`]. A give to `PROC_NULL` drops
    /// the value.
    fn give_with_tag<V: Givable>(&self, v: V, tag: i32) -> std::result::Result<(), GiveError<V>> {
        let c = self.comm();
        give_now(c, self.destination_rank(), tag, Traffic::PointToPoint, v)
    }

    /// [`Give::give_with_tag`] with tag 0.
    fn give<V: Givable>(&self, v: V) -> std::result::Result<(), GiveError<V>> {
        self.give_with_tag(v, 0)
    }

    /// Gives `v` with `tag` as a request of `scope` (`OPI_Igive`): the
    /// request is complete already (a give never waits for the taker) and
    /// mixes with two-sided requests in waits and tests. To a rank on
    /// another node (a communicator spanning nodes) the value's bytes
    /// travel through MPI and the request completes once they are sent;
    /// a value that owns further heap blocks is refused there and comes
    /// back in the error.
    fn immediate_give_with_tag<'s, V: Givable>(
        &self,
        scope: &'s Scope<'s, '_>,
        v: V,
        tag: i32,
    ) -> std::result::Result<Request<'s>, GiveError<V>> {
        let (c, dest) = (self.comm(), self.destination_rank());
        give_with(v, |b| {
            stays_on_heap(c, &b, dest)?;
            // SAFETY: as in `give_now`.
            unsafe { scope.start_give(c, Traffic::PointToPoint, b, dest, tag) }
        })
    }

    /// [`Give::immediate_give_with_tag`] with tag 0.
    fn immediate_give<'s, V: Givable>(
        &self,
        scope: &'s Scope<'s, '_>,
        v: V,
    ) -> std::result::Result<Request<'s>, GiveError<V>> {
        self.immediate_give_with_tag(scope, v, 0)
    }
}

impl<D: Destination + ?Sized> Give for D {}

/// Taking ownership from a source (implemented for every [`Source`]:
/// `process_at_rank(r)` and `any_process()`). Receives without `_with_tag`
/// take any tag. A value of another type than asked is [`Error::Type`] (see
/// [`crate::givable`]); a take from `PROC_NULL` is [`Error::Rank`] (there
/// is no value to return).
pub trait Take: Source {
    /// Takes a value of any [`Givable`] type with `tag`, and its status.
    fn take_owned_with_tag<V: Givable>(&self, tag: i32) -> Result<(V, Status)> {
        let c = self.comm();
        take_on(c, self.source_rank(), tag, Traffic::PointToPoint)
    }

    /// [`Take::take_owned_with_tag`] with any tag.
    fn take_owned<V: Givable>(&self) -> Result<(V, Status)> {
        self.take_owned_with_tag(ANY_TAG)
    }

    /// Takes a boxed `T` with `tag` (`OPI_Take`).
    fn take_with_tag<T: Transferable>(&self, tag: i32) -> Result<Box<T>> {
        take_value(self, tag)
    }

    /// Takes a boxed `T` with any tag.
    fn take<T: Transferable>(&self) -> Result<Box<T>> {
        self.take_with_tag(ANY_TAG)
    }

    /// Takes a `Vec<T>` with `tag`.
    fn take_vec_with_tag<T: Transferable>(&self, tag: i32) -> Result<Vec<T>> {
        take_value(self, tag)
    }

    /// Takes a `Vec<T>` with any tag.
    fn take_vec<T: Transferable>(&self) -> Result<Vec<T>> {
        self.take_vec_with_tag(ANY_TAG)
    }

    /// Takes a `Box<[T]>` with any tag.
    fn take_boxed_slice<T: Transferable>(&self) -> Result<Box<[T]>> {
        take_value(self, ANY_TAG)
    }

    /// Takes a `String` with any tag.
    fn take_string(&self) -> Result<String> {
        take_value(self, ANY_TAG)
    }

    /// Takes a pooled buffer of `T`s with `tag`.
    fn take_buf_with_tag<T: Transferable>(&self, tag: i32) -> Result<OpiBuf<T>> {
        take_value(self, tag)
    }

    /// Takes a pooled buffer of `T`s with any tag.
    fn take_buf<T: Transferable>(&self) -> Result<OpiBuf<T>> {
        self.take_buf_with_tag(ANY_TAG)
    }

    /// Starts taking a value with `tag` into `slot` (`OPI_Itake`); the
    /// request belongs to `scope`, which completes it at its end at the
    /// latest. Open the slot after the scope ([`TakeSlot::into_inner`]).
    /// Whatever the slot held before is dropped.
    fn immediate_take_with_tag<'s, V: Givable>(
        &self,
        scope: &'s Scope<'s, '_>,
        slot: &'s mut TakeSlot<V>,
        tag: i32,
    ) -> Result<Request<'s>> {
        let c = self.comm();
        if self.source_rank() == hmpi_core::PROC_NULL {
            // A take produces a value; PROC_NULL has none to give.
            return Err(Error::Rank {
                rank: hmpi_core::PROC_NULL,
                size: c.size(),
            });
        }
        slot.clear();
        // The request belongs to `scope`, which completes it (waiting, or
        // cancelling when unwinding) before `'s` ends; the slot is borrowed
        // mutably for `'s`, so nothing else touches it meanwhile.
        scope.start_take(c, &mut slot.block, V::ALIGN, self.source_rank(), tag)
    }

    /// [`Take::immediate_take_with_tag`] with any tag.
    fn immediate_take<'s, V: Givable>(
        &self,
        scope: &'s Scope<'s, '_>,
        slot: &'s mut TakeSlot<V>,
    ) -> Result<Request<'s>> {
        self.immediate_take_with_tag(scope, slot, ANY_TAG)
    }
}

impl<S: Source + ?Sized> Take for S {}

/// Where a nonblocking take puts its value: keep it outside the scope,
/// lend it to [`Take::immediate_take`], open it after the scope.
///
/// ```
/// use opi::prelude::*;
///
/// let universe = hmpi_core::init().unwrap();
/// let world = universe.world();
/// let me = world.this_process();
/// let mut slots: Vec<TakeSlot<Box<u64>>> = (0..3).map(|_| TakeSlot::new()).collect();
/// hmpi_core::request::scope(|scope| {
///     let mut reqs = Vec::new();
///     for s in slots.iter_mut() {
///         reqs.push(me.immediate_take(scope, s).unwrap());
///     }
///     for i in 0..3u64 {
///         me.give(Box::new(i)).unwrap();
///     }
///     for r in reqs {
///         r.wait().unwrap();
///     }
/// });
/// let got: Vec<u64> = slots.into_iter().map(|s| *s.into_inner().unwrap().unwrap()).collect();
/// assert_eq!(got, [0, 1, 2]);
/// ```
pub struct TakeSlot<V: Givable> {
    block: Option<OwnedBlock>,
    _value: PhantomData<fn() -> V>,
}

impl<V: Givable> TakeSlot<V> {
    /// An empty slot.
    pub const fn new() -> Self {
        TakeSlot {
            block: None,
            _value: PhantomData,
        }
    }

    /// Whether a take has put a message here.
    pub fn is_filled(&self) -> bool {
        self.block.is_some()
    }

    /// The taken value: `Ok(None)` if nothing was taken (the take never
    /// ran, was cancelled, or its allocation failed — its request reported
    /// that), an error if the message does not hold a `V` (its block is
    /// freed).
    pub fn into_inner(mut self) -> Result<Option<V>> {
        self.take()
    }

    /// Like [`TakeSlot::into_inner`], leaving the slot empty for reuse.
    pub fn take(&mut self) -> Result<Option<V>> {
        match self.block.take() {
            // SAFETY: a block the engine put here for us.
            Some(b) => unsafe { V::from_block(&b) }.map(Some),
            None => Ok(None),
        }
    }

    fn clear(&mut self) {
        drop(self.take());
    }
}

impl<V: Givable> Default for TakeSlot<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Givable> Drop for TakeSlot<V> {
    fn drop(&mut self) {
        self.clear();
    }
}

impl<V: Givable> std::fmt::Debug for TakeSlot<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TakeSlot")
            .field("value", &std::any::type_name::<V>())
            .field("filled", &self.is_filled())
            .finish()
    }
}
