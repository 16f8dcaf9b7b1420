//! rsmpi's `mpi::collective`: collectives on communicators
//! ([`CommunicatorCollectives`]) and rooted at a process ([`Root`]),
//! reduction operations.

use std::borrow::Borrow;
use std::ffi::{c_int, c_void};

use hmpi_core::traits::{
    CommunicatorCollectives as _, ImmediateCollectives as _, ImmediateRoot as CoreImmediateRoot,
    Root as CoreRoot,
};

use crate::check;
use crate::datatype::{
    dyn_pair, inout_buf, recv_buf, send_buf, Buffer, BufferMut, Dense, DynBuffer, DynBufferMut,
};
use crate::request::{start_from, start_into, Op, Request, Scope};
use crate::topology::{Communicator, Process, Rank};

use hmpi_core::collective::{Partition as CorePartition, PartitionMut as CorePartitionMut};
pub use hmpi_core::op::SystemOperation;

/// The traits of this module (in `mpi::traits`).
pub mod traits {
    pub use super::{CommunicatorCollectives, Operation, Root};
}

/// A reduction operation (rsmpi's `Operation`): a [`SystemOperation`], a
/// [`UserOperation`], or a reference to one.
pub trait Operation {
    /// hmpi-core's operation (not part of rsmpi's API).
    #[doc(hidden)]
    fn core_op(&self) -> hmpi_core::op::Operation;

    /// Whether the operation is commutative.
    fn is_commutative(&self) -> bool {
        self.core_op().is_commutative()
    }
}

impl Operation for SystemOperation {
    fn core_op(&self) -> hmpi_core::op::Operation {
        (*self).into()
    }
}

impl<T: Operation + ?Sized> Operation for &T {
    fn core_op(&self) -> hmpi_core::op::Operation {
        (**self).core_op()
    }
}

/// A user reduction operation (rsmpi's `UserOperation`): a closure over
/// the data as [`DynBuffer`] / [`DynBufferMut`], which it downcasts to the
/// element type. hmpi-core's `UserOperation` runs it on the packed data.
/// The closure must be `Send + Sync + 'static` (rsmpi: `Sync + 'a`).
#[derive(Clone, Debug)]
pub struct UserOperation<'a> {
    op: hmpi_core::op::UserOperation,
    _marker: std::marker::PhantomData<&'a ()>,
}

impl UserOperation<'_> {
    /// An associative (not necessarily commutative) operation:
    /// `inoutvec = invec op inoutvec`.
    pub fn associative<F>(function: F) -> Self
    where
        F: Fn(DynBuffer<'_>, DynBufferMut<'_>) + Send + Sync + 'static,
    {
        UserOperation {
            op: hmpi_core::op::UserOperation::non_commutative(move |a, o, t| {
                call_aligned(&function, a, o, t)
            }),
            _marker: std::marker::PhantomData,
        }
    }

    /// A commutative operation.
    pub fn commutative<F>(function: F) -> Self
    where
        F: Fn(DynBuffer<'_>, DynBufferMut<'_>) + Send + Sync + 'static,
    {
        UserOperation {
            op: hmpi_core::op::UserOperation::commutative(move |a, o, t| {
                call_aligned(&function, a, o, t)
            }),
            _marker: std::marker::PhantomData,
        }
    }
}

impl Operation for UserOperation<'_> {
    fn core_op(&self) -> hmpi_core::op::Operation {
        self.op.clone().into()
    }
}

/// A reduction function in C's shape (rsmpi's `UnsafeUserFunction`,
/// MPI's `MPI_User_function`): `inoutvec[i] = invec[i] op inoutvec[i]` for
/// the `*len` elements of datatype `*datatype`.
pub type UnsafeUserFunction = unsafe extern "C" fn(
    invec: *mut c_void,
    inoutvec: *mut c_void,
    len: *mut c_int,
    datatype: *mut crate::ffi::MPI_Datatype,
);

/// A user reduction operation defined by a C-style function (rsmpi's
/// `UnsafeUserOperation`), run as hmpi-core's `UserOperation` on the packed
/// data: the function sees 16-byte aligned copies of whole elements, the
/// element count and the datatype's handle ([`crate::ffi::MPI_Datatype`]).
#[derive(Clone, Debug)]
pub struct UnsafeUserOperation {
    op: hmpi_core::op::UserOperation,
}

impl UnsafeUserOperation {
    /// An associative (not necessarily commutative) operation.
    ///
    /// # Safety
    /// `function` must be safe to call on the data of every reduction this
    /// operation is used in (as in rsmpi).
    pub unsafe fn associative(function: UnsafeUserFunction) -> Self {
        // SAFETY: the caller's promise is passed on.
        unsafe { Self::new(false, function) }
    }

    /// A commutative operation.
    ///
    /// # Safety
    /// As [`UnsafeUserOperation::associative`].
    pub unsafe fn commutative(function: UnsafeUserFunction) -> Self {
        // SAFETY: the caller's promise is passed on.
        unsafe { Self::new(true, function) }
    }

    /// An operation, commutative if `commute` (`MPI_Op_create`).
    ///
    /// # Safety
    /// As [`UnsafeUserOperation::associative`].
    pub unsafe fn new(commute: bool, function: UnsafeUserFunction) -> Self {
        let call = move |a: &[u8], o: &mut [u8], t: &hmpi_core::datatype::Datatype| {
            with_aligned(a, o, |a, o| {
                let mut len = c_int::try_from(o.len() / t.size().max(1)).unwrap_or(c_int::MAX);
                let mut handle = crate::ffi::handle_of(t);
                // SAFETY: the constructor's caller promised that `function`
                // is safe on this reduction's data: `len` whole elements of
                // the datatype behind `handle` in each aligned copy (which
                // live for the call and are this call's own).
                unsafe {
                    function(
                        a.as_mut_ptr().cast(),
                        o.as_mut_ptr().cast(),
                        &mut len,
                        &mut handle,
                    )
                };
            })
        };
        UnsafeUserOperation {
            op: if commute {
                hmpi_core::op::UserOperation::commutative(call)
            } else {
                hmpi_core::op::UserOperation::non_commutative(call)
            },
        }
    }
}

impl Operation for UnsafeUserOperation {
    fn core_op(&self) -> hmpi_core::op::Operation {
        self.op.clone().into()
    }
}

/// Storage aligned for every type up to 16-byte alignment.
fn aligned_copy(bytes: &[u8]) -> Vec<u128> {
    let mut v = vec![0u128; bytes.len().div_ceil(16)];
    // SAFETY: `v` has at least `bytes.len()` bytes, `u128` has no invalid
    // byte patterns, and the two do not overlap (`v` is new).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr().cast::<u8>(), bytes.len());
    }
    v
}

/// Runs `f` on 16-byte aligned copies of `input` and `inout` (so that
/// its views of elements are aligned; a C function may write to either),
/// then copies `inout` back.
fn with_aligned(input: &[u8], inout: &mut [u8], f: impl FnOnce(&mut [u8], &mut [u8])) {
    let mut a = aligned_copy(input);
    let mut o = aligned_copy(inout);
    {
        // SAFETY: the vectors hold at least as many bytes as the slices
        // they were copied from, and live until the end of this block.
        let (ab, ob) = unsafe {
            (
                std::slice::from_raw_parts_mut(a.as_mut_ptr().cast::<u8>(), input.len()),
                std::slice::from_raw_parts_mut(o.as_mut_ptr().cast::<u8>(), inout.len()),
            )
        };
        f(ab, ob);
    }
    // SAFETY: `o` holds at least `inout.len()` bytes; distinct allocations.
    unsafe {
        std::ptr::copy_nonoverlapping(o.as_ptr().cast::<u8>(), inout.as_mut_ptr(), inout.len());
    }
}

/// Runs a user operation's closure on aligned copies of the packed data.
fn call_aligned<F>(f: &F, input: &[u8], inout: &mut [u8], datatype: &hmpi_core::datatype::Datatype)
where
    F: Fn(DynBuffer<'_>, DynBufferMut<'_>),
{
    with_aligned(input, inout, |ab, ob| {
        let (a, o) = dyn_pair(ab, ob, datatype);
        f(a, o);
    })
}

/// A buffer of pieces of different lengths at given displacements, in
/// elements (rsmpi's `Partition`), for the varying-count collectives. The
/// buffer's datatype must be one run of bytes (a buffer that needs
/// packing aborts).
#[repr(transparent)]
pub struct Partition<'b, B: ?Sized, C, D>(pub(crate) CorePartition<'b, Dense<B>, C, D>);

impl<'b, B: ?Sized + Buffer, C: Borrow<[i32]>, D: Borrow<[i32]>> Partition<'b, B, C, D> {
    /// Pieces of `buf`: `counts[i]` elements from element `displs[i]`.
    pub fn new(buf: &'b B, counts: C, displs: D) -> Self {
        Partition(CorePartition::new(Dense::of(buf), counts, displs))
    }
}

/// A mutable buffer of pieces of different lengths (rsmpi's
/// `PartitionMut`), as [`Partition`].
#[repr(transparent)]
pub struct PartitionMut<'b, B: ?Sized, C, D>(pub(crate) CorePartitionMut<'b, Dense<B>, C, D>);

impl<'b, B: ?Sized + BufferMut, C: Borrow<[i32]>, D: Borrow<[i32]>> PartitionMut<'b, B, C, D> {
    /// Pieces of `buf`: `counts[i]` elements from element `displs[i]`.
    pub fn new(buf: &'b mut B, counts: C, displs: D) -> Self {
        PartitionMut(CorePartitionMut::new(Dense::of_mut(buf), counts, displs))
    }
}

/// Combines `inbuf` into `inoutbuf` with `op` on this process
/// (`MPI_Reduce_local`).
pub fn reduce_local_into<S, R, O>(inbuf: &S, inoutbuf: &mut R, op: O)
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
    O: Operation,
{
    use hmpi_core::datatype::Buffer as _;
    let (inbuf, inoutbuf) = (Dense::of(inbuf), Dense::of_mut(inoutbuf));
    let dt = inbuf.element_datatype();
    let n = inbuf.as_bytes().len().checked_div(dt.size()).unwrap_or(0);
    check(hmpi_core::op::reduce_local(
        inbuf,
        inoutbuf,
        n,
        &dt,
        &op.core_op(),
    ))
}

/// Collectives over every process of a communicator (rsmpi's
/// `CommunicatorCollectives`).
pub trait CommunicatorCollectives: Communicator {
    /// `MPI_Barrier`.
    fn barrier(&self) {
        check(hmpi_core::traits::Communicator::barrier(self.core()))
    }

    /// `MPI_Allgather`.
    fn all_gather_into<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        let mut r = recv_buf(recvbuf);
        check(self.core().all_gather_into(&send_buf(sendbuf), &mut r));
        r.finish(None)
    }

    /// `MPI_Allgatherv`.
    fn all_gather_varcount_into<S, R, C, D>(
        &self,
        sendbuf: &S,
        recvbuf: &mut PartitionMut<'_, R, C, D>,
    ) where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C: Borrow<[i32]>,
        D: Borrow<[i32]>,
    {
        check(
            self.core()
                .all_gather_varcount_into(Dense::of(sendbuf), &mut recvbuf.0),
        )
    }

    /// `MPI_Alltoall`.
    fn all_to_all_into<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        let mut r = recv_buf(recvbuf);
        check(self.core().all_to_all_into(&send_buf(sendbuf), &mut r));
        r.finish(None)
    }

    /// `MPI_Alltoallv`.
    fn all_to_all_varcount_into<S, R, C1, D1, C2, D2>(
        &self,
        sendbuf: &Partition<'_, S, C1, D1>,
        recvbuf: &mut PartitionMut<'_, R, C2, D2>,
    ) where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C1: Borrow<[i32]>,
        D1: Borrow<[i32]>,
        C2: Borrow<[i32]>,
        D2: Borrow<[i32]>,
    {
        check(
            self.core()
                .all_to_all_varcount_into(&sendbuf.0, &mut recvbuf.0),
        )
    }

    /// `MPI_Allreduce`.
    fn all_reduce_into<S: ?Sized + Buffer, R: ?Sized + BufferMut, O: Operation>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) {
        check(
            self.core()
                .all_reduce_into(Dense::of(sendbuf), Dense::of_mut(recvbuf), op.core_op()),
        )
    }

    /// `MPI_Reduce_scatter_block`.
    fn reduce_scatter_block_into<S: ?Sized + Buffer, R: ?Sized + BufferMut, O: Operation>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) {
        check(self.core().reduce_scatter_block_into(
            Dense::of(sendbuf),
            Dense::of_mut(recvbuf),
            op.core_op(),
        ))
    }

    /// `MPI_Scan`.
    fn scan_into<S: ?Sized + Buffer, R: ?Sized + BufferMut, O: Operation>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) {
        check(
            self.core()
                .scan_into(Dense::of(sendbuf), Dense::of_mut(recvbuf), op.core_op()),
        )
    }

    /// `MPI_Exscan`.
    fn exclusive_scan_into<S: ?Sized + Buffer, R: ?Sized + BufferMut, O: Operation>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) {
        check(self.core().exclusive_scan_into(
            Dense::of(sendbuf),
            Dense::of_mut(recvbuf),
            op.core_op(),
        ))
    }

    /// `MPI_Ibarrier`: a request that borrows nothing, so it needs no
    /// scope. rsmpi's is `Request<'static, ()>`; here any lifetime, so
    /// that it also joins a scope's `RequestCollection`.
    fn immediate_barrier<'a>(&self) -> Request<'a, (), crate::request::StaticScope> {
        let r = check(hmpi_core::collective::raw::barrier(
            self.core(),
            hmpi_core::collective::raw::Mode::Start,
        ));
        Request::new(Op::Owned(r), &())
    }

    /// `MPI_Iallgather` in `scope`.
    fn immediate_all_gather_into<'a, S, R, Sc>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        Sc: Scope<'a>,
    {
        let c = self.core();
        start_into(scope, recvbuf, Dense::of_mut, |s, recvbuf| {
            c.immediate_all_gather_into(s, Dense::of(sendbuf), recvbuf)
        })
    }

    /// `MPI_Ialltoall` in `scope`.
    fn immediate_all_to_all_into<'a, S, R, Sc>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        Sc: Scope<'a>,
    {
        let c = self.core();
        start_into(scope, recvbuf, Dense::of_mut, |s, recvbuf| {
            c.immediate_all_to_all_into(s, Dense::of(sendbuf), recvbuf)
        })
    }

    /// `MPI_Iallreduce` in `scope`.
    fn immediate_all_reduce_into<'a, S, R, O, Sc>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Operation,
        Sc: Scope<'a>,
    {
        let (c, op) = (self.core(), op.core_op());
        start_into(scope, recvbuf, Dense::of_mut, |s, recvbuf| {
            c.immediate_all_reduce_into(s, Dense::of(sendbuf), recvbuf, op)
        })
    }

    /// `MPI_Ireduce_scatter_block` in `scope`.
    fn immediate_reduce_scatter_block_into<'a, S, R, O, Sc>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Operation,
        Sc: Scope<'a>,
    {
        let (c, op) = (self.core(), op.core_op());
        start_into(scope, recvbuf, Dense::of_mut, |s, recvbuf| {
            c.immediate_reduce_scatter_block_into(s, Dense::of(sendbuf), recvbuf, op)
        })
    }

    /// `MPI_Iscan` in `scope`.
    fn immediate_scan_into<'a, S, R, O, Sc>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Operation,
        Sc: Scope<'a>,
    {
        let (c, op) = (self.core(), op.core_op());
        start_into(scope, recvbuf, Dense::of_mut, |s, recvbuf| {
            c.immediate_scan_into(s, Dense::of(sendbuf), recvbuf, op)
        })
    }

    /// `MPI_Iexscan` in `scope`.
    fn immediate_exclusive_scan_into<'a, S, R, O, Sc>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Operation,
        Sc: Scope<'a>,
    {
        let (c, op) = (self.core(), op.core_op());
        start_into(scope, recvbuf, Dense::of_mut, |s, recvbuf| {
            c.immediate_exclusive_scan_into(s, Dense::of(sendbuf), recvbuf, op)
        })
    }

    /// `MPI_Iallgatherv` in `scope`.
    fn immediate_all_gather_varcount_into<'a, 'b, S, R, C, D, Sc>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut PartitionMut<'b, R, C, D>,
    ) -> Request<'a, PartitionMut<'b, R, C, D>, Sc>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C: Borrow<[i32]>,
        D: Borrow<[i32]>,
        Sc: Scope<'a>,
    {
        let c = self.core();
        start_into(
            scope,
            recvbuf,
            |p| &mut p.0,
            |s, recvbuf| c.immediate_all_gather_varcount_into(s, Dense::of(sendbuf), recvbuf),
        )
    }

    /// `MPI_Ialltoallv` in `scope`.
    fn immediate_all_to_all_varcount_into<'a, 'b, S, R, C1, D1, C2, D2, Sc>(
        &self,
        scope: Sc,
        sendbuf: &'a Partition<'_, S, C1, D1>,
        recvbuf: &'a mut PartitionMut<'b, R, C2, D2>,
    ) -> Request<'a, PartitionMut<'b, R, C2, D2>, Sc>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C1: Borrow<[i32]>,
        D1: Borrow<[i32]>,
        C2: Borrow<[i32]>,
        D2: Borrow<[i32]>,
        Sc: Scope<'a>,
    {
        let c = self.core();
        start_into(
            scope,
            recvbuf,
            |p| &mut p.0,
            |s, recvbuf| c.immediate_all_to_all_varcount_into(s, &sendbuf.0, recvbuf),
        )
    }
}

impl<C: Communicator + ?Sized> CommunicatorCollectives for C {}

/// Collectives rooted at a process (rsmpi's `Root`), called on
/// `comm.process_at_rank(root)`.
pub trait Root {
    /// hmpi-core's process (not part of rsmpi's API).
    #[doc(hidden)]
    fn core_root(&self) -> &Process<'_>;

    /// The root's rank.
    fn root_rank(&self) -> Rank {
        self.core_root().rank()
    }

    /// `MPI_Bcast`.
    fn broadcast_into<Buf: ?Sized + BufferMut>(&self, buffer: &mut Buf) {
        let mut b = inout_buf(buffer);
        check(CoreRoot::broadcast_into(self.core_root(), &mut b));
        b.finish(None)
    }

    /// `MPI_Gather` on a process other than the root.
    fn gather_into<S: ?Sized + Buffer>(&self, sendbuf: &S) {
        check(CoreRoot::gather_into(self.core_root(), &send_buf(sendbuf)))
    }

    /// `MPI_Gather` at the root.
    fn gather_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        let mut r = recv_buf(recvbuf);
        check(CoreRoot::gather_into_root(
            self.core_root(),
            &send_buf(sendbuf),
            &mut r,
        ));
        r.finish(None)
    }

    /// `MPI_Gatherv` on a process other than the root.
    fn gather_varcount_into<S: ?Sized + Buffer>(&self, sendbuf: &S) {
        check(CoreRoot::gather_varcount_into(
            self.core_root(),
            Dense::of(sendbuf),
        ))
    }

    /// `MPI_Gatherv` at the root.
    fn gather_varcount_into_root<S, R, C, D>(
        &self,
        sendbuf: &S,
        recvbuf: &mut PartitionMut<'_, R, C, D>,
    ) where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C: Borrow<[i32]>,
        D: Borrow<[i32]>,
    {
        check(CoreRoot::gather_varcount_into_root(
            self.core_root(),
            Dense::of(sendbuf),
            &mut recvbuf.0,
        ))
    }

    /// `MPI_Scatter` on a process other than the root.
    fn scatter_into<R: ?Sized + BufferMut>(&self, recvbuf: &mut R) {
        let mut r = recv_buf(recvbuf);
        check(CoreRoot::scatter_into(self.core_root(), &mut r));
        r.finish(None)
    }

    /// `MPI_Scatter` at the root.
    fn scatter_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        let mut r = recv_buf(recvbuf);
        check(CoreRoot::scatter_into_root(
            self.core_root(),
            &send_buf(sendbuf),
            &mut r,
        ));
        r.finish(None)
    }

    /// `MPI_Scatterv` on a process other than the root.
    fn scatter_varcount_into<R: ?Sized + BufferMut>(&self, recvbuf: &mut R) {
        check(CoreRoot::scatter_varcount_into(
            self.core_root(),
            Dense::of_mut(recvbuf),
        ))
    }

    /// `MPI_Scatterv` at the root.
    fn scatter_varcount_into_root<S, R, C, D>(
        &self,
        sendbuf: &Partition<'_, S, C, D>,
        recvbuf: &mut R,
    ) where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C: Borrow<[i32]>,
        D: Borrow<[i32]>,
    {
        check(CoreRoot::scatter_varcount_into_root(
            self.core_root(),
            &sendbuf.0,
            Dense::of_mut(recvbuf),
        ))
    }

    /// `MPI_Reduce` on a process other than the root.
    fn reduce_into<S: ?Sized + Buffer, O: Operation>(&self, sendbuf: &S, op: O) {
        check(CoreRoot::reduce_into(
            self.core_root(),
            Dense::of(sendbuf),
            op.core_op(),
        ))
    }

    /// `MPI_Reduce` at the root.
    fn reduce_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut, O: Operation>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) {
        check(CoreRoot::reduce_into_root(
            self.core_root(),
            Dense::of(sendbuf),
            Dense::of_mut(recvbuf),
            op.core_op(),
        ))
    }

    /// `MPI_Ibcast` in `scope`.
    fn immediate_broadcast_into<'a, Buf: ?Sized + BufferMut, Sc: Scope<'a>>(
        &self,
        scope: Sc,
        buf: &'a mut Buf,
    ) -> Request<'a, Buf, Sc> {
        let p = self.core_root();
        start_into(scope, buf, Dense::of_mut, |s, buf| {
            CoreImmediateRoot::immediate_broadcast_into(p, s, buf)
        })
    }

    /// `MPI_Ireduce` in `scope` on a process other than the root.
    fn immediate_reduce_into<'a, Sc: Scope<'a>, S: ?Sized + Buffer, O: Operation>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        op: O,
    ) -> Request<'a, S, Sc> {
        let (p, op) = (self.core_root(), op.core_op());
        start_from(scope, sendbuf, |s| {
            CoreImmediateRoot::immediate_reduce_into(p, s, Dense::of(sendbuf), op)
        })
    }

    /// `MPI_Ireduce` in `scope` at the root.
    fn immediate_reduce_into_root<
        'a,
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Operation,
    >(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc> {
        let (p, op) = (self.core_root(), op.core_op());
        start_into(scope, recvbuf, Dense::of_mut, |s, recvbuf| {
            CoreImmediateRoot::immediate_reduce_into_root(p, s, Dense::of(sendbuf), recvbuf, op)
        })
    }

    /// `MPI_Igather` in `scope` on a process other than the root.
    fn immediate_gather_into<'a, S: ?Sized + Buffer, Sc: Scope<'a>>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
    ) -> Request<'a, S, Sc> {
        let p = self.core_root();
        start_from(scope, sendbuf, |s| {
            CoreImmediateRoot::immediate_gather_into(p, s, Dense::of(sendbuf))
        })
    }

    /// `MPI_Igather` in `scope` at the root.
    fn immediate_gather_into_root<'a, S, R, Sc>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        Sc: Scope<'a>,
    {
        let p = self.core_root();
        start_into(scope, recvbuf, Dense::of_mut, |s, recvbuf| {
            CoreImmediateRoot::immediate_gather_into_root(p, s, Dense::of(sendbuf), recvbuf)
        })
    }

    /// `MPI_Igatherv` in `scope` on a process other than the root.
    fn immediate_gather_varcount_into<'a, Sc: Scope<'a>, S: ?Sized + Buffer>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
    ) -> Request<'a, S, Sc> {
        let p = self.core_root();
        start_from(scope, sendbuf, |s| {
            CoreImmediateRoot::immediate_gather_varcount_into(p, s, Dense::of(sendbuf))
        })
    }

    /// `MPI_Igatherv` in `scope` at the root.
    fn immediate_gather_varcount_into_root<'a, 'b, Sc, S, R, C, D>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut PartitionMut<'b, R, C, D>,
    ) -> Request<'a, PartitionMut<'b, R, C, D>, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C: Borrow<[i32]>,
        D: Borrow<[i32]>,
    {
        let p = self.core_root();
        start_into(
            scope,
            recvbuf,
            |p| &mut p.0,
            |s, recvbuf| {
                CoreImmediateRoot::immediate_gather_varcount_into_root(
                    p,
                    s,
                    Dense::of(sendbuf),
                    recvbuf,
                )
            },
        )
    }

    /// `MPI_Iscatter` in `scope` on a process other than the root.
    fn immediate_scatter_into<'a, Sc: Scope<'a>, R: ?Sized + BufferMut>(
        &self,
        scope: Sc,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc> {
        let p = self.core_root();
        start_into(scope, recvbuf, Dense::of_mut, |s, recvbuf| {
            CoreImmediateRoot::immediate_scatter_into(p, s, recvbuf)
        })
    }

    /// `MPI_Iscatter` in `scope` at the root.
    fn immediate_scatter_into_root<'a, Sc, S, R>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        let p = self.core_root();
        start_into(scope, recvbuf, Dense::of_mut, |s, recvbuf| {
            CoreImmediateRoot::immediate_scatter_into_root(p, s, Dense::of(sendbuf), recvbuf)
        })
    }

    /// `MPI_Iscatterv` in `scope` on a process other than the root.
    fn immediate_scatter_varcount_into<'a, Sc: Scope<'a>, R: ?Sized + BufferMut>(
        &self,
        scope: Sc,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc> {
        let p = self.core_root();
        start_into(scope, recvbuf, Dense::of_mut, |s, recvbuf| {
            CoreImmediateRoot::immediate_scatter_varcount_into(p, s, recvbuf)
        })
    }

    /// `MPI_Iscatterv` in `scope` at the root.
    fn immediate_scatter_varcount_into_root<'a, Sc, S, R, C, D>(
        &self,
        scope: Sc,
        sendbuf: &'a Partition<'_, S, C, D>,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C: Borrow<[i32]>,
        D: Borrow<[i32]>,
    {
        let p = self.core_root();
        start_into(scope, recvbuf, Dense::of_mut, |s, recvbuf| {
            CoreImmediateRoot::immediate_scatter_varcount_into_root(p, s, &sendbuf.0, recvbuf)
        })
    }

    /// `MPI_Comm_spawn` rooted here: refused with an error (see
    /// `docs/rsmpi.md`).
    fn spawn(
        &self,
        command: &std::process::Command,
        maxprocs: Rank,
    ) -> Result<crate::topology::InterCommunicator, crate::MpiError> {
        let _ = (command, maxprocs);
        Err(spawn_refused())
    }

    /// `MPI_Comm_spawn_multiple` rooted here: refused with an error.
    fn spawn_multiple(
        &self,
        commands: &[std::process::Command],
        maxprocs: &[Rank],
    ) -> Result<crate::topology::InterCommunicator, crate::MpiError> {
        let _ = (commands, maxprocs);
        Err(spawn_refused())
    }
}

/// Dynamic process creation (rsmpi's `Root::spawn`): refused, as hmpi's
/// ranks are the processes the launcher started on one node.
fn spawn_refused() -> crate::MpiError {
    hmpi_core::Error::Comm {
        reason: "dynamic process creation (MPI_Comm_spawn) is not supported: \
                 start every rank with hmpirun"
            .into(),
    }
}

impl Root for Process<'_> {
    fn core_root(&self) -> &Process<'_> {
        self
    }
}
