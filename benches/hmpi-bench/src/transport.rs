//! The small interface through which the message workloads measure a
//! message-passing library, and its backends.
//!
//! A [`Transport`] is one rank's view of a two-rank (or larger) job: its
//! rank, blocking send and receive, a barrier, the *window* operations
//! of the OSU bandwidth benchmarks (start `count` sends or receives of one
//! buffer at once, then wait for all of them), and the collectives of the
//! `coll` kernels ([`Transport::collective`], one [`CollOp`] at a time).
//! Every workload in [`crate::p2p`] and [`crate::coll`] is written once
//! against this trait, so hmpi and its MPI peers run exactly the same
//! loops. Later workloads (one-sided windows) add methods here, with a
//! default body that returns an error naming the backend and the
//! operation (as `collective` has), so that a backend that lacks one says
//! so instead of failing to build.
//!
//! Backends:
//!
//! * [`Hmpi`] (`hmpi`): the typed runtime users program against
//!   (`hmpi_core::init`, `process_at_rank(r).send_with_tag`,
//!   `receive_into_with_tag`, `barrier`) for the blocking calls and its
//!   collectives (`CommunicatorCollectives`, `Root`, with
//!   `SystemOperation::sum()`) for [`CollOp`]; the
//!   windows use the engine underneath it (`vci::Endpoint::isend` /
//!   `irecv` on the world's context, then `vci::wait_all`), because
//!   the OSU windows post 64 receives into *one* buffer, which no set of
//!   Rust references can express and so no typed receive accepts.
//!   Buffers come from the global allocator, which in a message worker is
//!   the node heap (see [`crate::node_heap_allocator`]).
//! * `Rsmpi` (`rsmpi-openmpi`, `rsmpi-mpich`; feature `mpi`): rsmpi over
//!   the MPI this build linked: `mpi::initialize`,
//!   `process_at_rank(r).send_with_tag`, `receive_into_with_tag`,
//!   `barrier`, rsmpi 0.8's collectives (`mpi::collective::{
//!   CommunicatorCollectives, Root}`, `SystemOperation::sum()`) with the
//!   same names and buffers as hmpi's; the windows through rsmpi's C
//!   bindings (`mpi::ffi`:
//!   `MPI_Isend`, `MPI_Irecv`, `MPI_Waitall`), exactly as the OSU C code
//!   calls them. Buffers come from the system allocator, as in any MPI
//!   program.
//!
//! # Example
//! ```ignore
//! let t: Box<dyn Transport> = open("hmpi", "hmpi")?;
//! let mut buf = AlignedBuf::new(8)?;
//! if t.rank() == 0 {
//!     t.send(buf.as_slice(), 1, 1)?;
//! } else {
//!     t.recv(buf.as_mut_slice(), 0, 1)?;
//! }
//! ```

use std::alloc::{self, Layout};

/// Why a transport operation failed (the library's own message).
pub type TResult<T> = Result<T, String>;

/// One rank's view of a message-passing library, as the workloads use it.
pub trait Transport {
    /// The backend's label in results, e.g. `hmpi` or `rsmpi-openmpi`.
    fn label(&self) -> &str;
    /// This rank, `0..size`.
    fn rank(&self) -> usize;
    /// Ranks in the job.
    fn size(&self) -> usize;
    /// Waits until every rank has entered the barrier.
    fn barrier(&self) -> TResult<()>;
    /// Sends `buf` to `dest` with `tag` and waits (standard mode).
    fn send(&self, buf: &[u8], dest: usize, tag: i32) -> TResult<()>;
    /// Receives a message of at most `buf.len()` bytes from `source` with
    /// `tag` into `buf` and waits.
    fn recv(&self, buf: &mut [u8], source: usize, tag: i32) -> TResult<()>;
    /// Starts `count` nonblocking sends of all of `buf` to `dest`, then
    /// waits for all of them (one OSU window).
    fn send_window(&self, buf: &[u8], count: usize, dest: usize, tag: i32) -> TResult<()>;
    /// Posts `count` nonblocking receives from `source`, all into `buf`,
    /// then waits for all of them.
    fn recv_window(&self, buf: &mut [u8], count: usize, source: usize, tag: i32) -> TResult<()>;
    /// Posts `count` receives from `peer` into `rbuf`, then starts `count`
    /// sends of `sbuf` to `peer`, then waits for all (one `osu_bibw`
    /// window).
    fn exchange_window(
        &self,
        sbuf: &[u8],
        rbuf: &mut [u8],
        count: usize,
        peer: usize,
        tag: i32,
    ) -> TResult<()>;
    /// One collective call on the whole job, root 0 where there is one
    /// (see [`CollOp`] for the buffers each takes; reductions are sums of
    /// `f64`s, so their buffers hold whole, aligned `f64`s). The default
    /// says that the backend has no collectives.
    fn collective(&self, op: CollOp, send: &[u8], recv: &mut [u8]) -> TResult<()> {
        let _ = (send, recv);
        Err(format!("{}: {} is not available", self.label(), op.name()))
    }
}

/// The collective operations of the `coll` workloads. With `n` ranks and a
/// per-rank size `s` (bytes), the buffers are:
///
/// | op | `send` | `recv` |
/// |---|---|---|
/// | `Barrier` | unused | unused |
/// | `Bcast` | unused | `s`: the root's data, the others' result |
/// | `Reduce`, `Allreduce` | `s` | `s` (the result; at the root for `Reduce`) |
/// | `Gather` | `s` | `n * s` at the root |
/// | `Scatter` | `n * s` at the root | `s` |
/// | `Allgather` | `s` | `n * s` |
/// | `Alltoall` | `n * s` | `n * s` |
/// | `ReduceScatterBlock` | `n * s` | `s` |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollOp {
    /// `MPI_Barrier`.
    Barrier,
    /// `MPI_Bcast` from rank 0.
    Bcast,
    /// `MPI_Reduce` (sum of `f64`) to rank 0.
    Reduce,
    /// `MPI_Allreduce` (sum of `f64`).
    Allreduce,
    /// `MPI_Gather` to rank 0.
    Gather,
    /// `MPI_Scatter` from rank 0.
    Scatter,
    /// `MPI_Allgather`.
    Allgather,
    /// `MPI_Alltoall`.
    Alltoall,
    /// `MPI_Reduce_scatter_block` (sum of `f64`).
    ReduceScatterBlock,
}

impl CollOp {
    /// The MPI function's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            CollOp::Barrier => "MPI_Barrier",
            CollOp::Bcast => "MPI_Bcast",
            CollOp::Reduce => "MPI_Reduce",
            CollOp::Allreduce => "MPI_Allreduce",
            CollOp::Gather => "MPI_Gather",
            CollOp::Scatter => "MPI_Scatter",
            CollOp::Allgather => "MPI_Allgather",
            CollOp::Alltoall => "MPI_Alltoall",
            CollOp::ReduceScatterBlock => "MPI_Reduce_scatter_block",
        }
    }
}

/// `b` as the `f64`s it holds (reductions' buffers).
pub fn f64s(b: &[u8]) -> TResult<&[f64]> {
    // SAFETY: every bit pattern is a valid `f64`; `align_to` puts only
    // whole, aligned elements in the middle part, which is all we use.
    let (head, mid, tail) = unsafe { b.align_to::<f64>() };
    if head.is_empty() && tail.is_empty() {
        Ok(mid)
    } else {
        Err(format!(
            "a buffer of {} bytes is not whole, aligned f64s",
            b.len()
        ))
    }
}

/// `b` as the `f64`s it holds, mutably.
pub fn f64s_mut(b: &mut [u8]) -> TResult<&mut [f64]> {
    let len = b.len();
    // SAFETY: as in `f64s`; every `f64` written is valid bytes too.
    let (head, mid, tail) = unsafe { b.align_to_mut::<f64>() };
    if head.is_empty() && tail.is_empty() {
        Ok(mid)
    } else {
        Err(format!(
            "a buffer of {len} bytes is not whole, aligned f64s"
        ))
    }
}

/// Opens the backend `name` for this process (collective over the job's
/// ranks); `label` names it in results.
pub fn open(name: &str, label: &str) -> TResult<Box<dyn Transport>> {
    match name {
        "hmpi" => Ok(Box::new(Hmpi::open(label)?)),
        #[cfg(feature = "mpi")]
        "rsmpi" => Ok(Box::new(rsmpi::Rsmpi::open(label)?)),
        #[cfg(not(feature = "mpi"))]
        "rsmpi" => Err("this hmpi-bench was built without the `mpi` feature; \
             build it with `cargo build --release -p hmpi-bench --features mpi` (after scripts/setup-mpi)"
            .into()),
        other => Err(format!("unknown transport '{other}' (known: hmpi, rsmpi)")),
    }
}

/// A zero-filled, page-aligned byte buffer from the global allocator (so
/// that in an hmpi worker it lives in the node heap). Page alignment as in
/// the OSU benchmarks.
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
    layout: Layout,
}

impl AlignedBuf {
    /// Alignment of every buffer.
    pub const ALIGN: usize = 4096;

    /// A buffer of `len` bytes (an allocation of at least one byte, so that
    /// the pointer is real even for `len` 0), every page touched.
    pub fn new(len: usize) -> TResult<AlignedBuf> {
        let layout = Layout::from_size_align(len.max(1), Self::ALIGN)
            .map_err(|e| format!("a buffer of {len} bytes: {e}"))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(format!("cannot allocate a buffer of {len} bytes"));
        }
        let mut b = AlignedBuf { ptr, len, layout };
        // Fault every page in now, not inside the first timed loop.
        b.as_mut_slice().fill(1);
        Ok(b)
    }

    /// The buffer's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is a live allocation of at least `len` initialised
        // (zeroed) bytes, borrowed shared for `&self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The buffer's bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, borrowed uniquely for `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { alloc::dealloc(self.ptr, self.layout) }
    }
}

// ---------------------------------------------------------------------------
// hmpi

/// The hmpi backend: the typed runtime, and its engine for the windows.
pub struct Hmpi {
    label: String,
    world: hmpi::SimpleCommunicator,
    endpoint: &'static vci::Endpoint,
    /// The engine context of the world's point-to-point traffic.
    context: u32,
    // Last: dropping it finalizes the runtime (a barrier over the world).
    _universe: hmpi::Universe,
}

impl Hmpi {
    /// Initialises the runtime (collective: every rank of the launcher's
    /// job calls it).
    pub fn open(label: &str) -> TResult<Hmpi> {
        let universe = hmpi::init().map_err(|e| format!("hmpi init: {e}"))?;
        let world = universe.world();
        let endpoint =
            hmpi::hmpi_core::environment::endpoint().map_err(|e| format!("hmpi endpoint: {e}"))?;
        let context = world.context();
        Ok(Hmpi {
            label: label.to_owned(),
            world,
            endpoint,
            context,
            _universe: universe,
        })
    }

    fn err(&self, what: &str, e: impl std::fmt::Display) -> String {
        format!("{} {what}: {e}", self.label)
    }

    fn wait(&self, reqs: Vec<vci::Request<'_>>, what: &str) -> TResult<()> {
        vci::wait_all(reqs).map(drop).map_err(|e| self.err(what, e))
    }

    /// Keeps a request that has yet to finish for the window's wait; one
    /// that finished as it started (a send through a fast box, a receive
    /// whose message was there: most of a window of small messages) is
    /// done with once its status is checked, as `MPI_Isend` and `MPI_Irecv`
    /// do in libhmpi.
    fn keep<'a>(
        &self,
        reqs: &mut Vec<vci::Request<'a>>,
        r: vci::Result<vci::Request<'a>>,
        what: &str,
    ) -> TResult<()> {
        let r = r.map_err(|e| self.err(what, e))?;
        match r.finished() {
            Some(st) => st.into_result().map(drop).map_err(|e| self.err(what, e)),
            None => {
                reqs.push(r);
                Ok(())
            }
        }
    }
}

impl Transport for Hmpi {
    fn label(&self) -> &str {
        &self.label
    }

    fn rank(&self) -> usize {
        use hmpi::traits::Communicator;
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        use hmpi::traits::Communicator;
        self.world.size() as usize
    }

    fn barrier(&self) -> TResult<()> {
        use hmpi::traits::Communicator;
        self.world.barrier().map_err(|e| self.err("barrier", e))
    }

    fn send(&self, buf: &[u8], dest: usize, tag: i32) -> TResult<()> {
        use hmpi::traits::{Communicator, Destination};
        self.world
            .process_at_rank(dest as i32)
            .send_with_tag(buf, tag)
            .map_err(|e| self.err("send", e))
    }

    fn recv(&self, buf: &mut [u8], source: usize, tag: i32) -> TResult<()> {
        use hmpi::traits::{Communicator, Source};
        self.world
            .process_at_rank(source as i32)
            .receive_into_with_tag(buf, tag)
            .map(drop)
            .map_err(|e| self.err("receive", e))
    }

    fn send_window(&self, buf: &[u8], count: usize, dest: usize, tag: i32) -> TResult<()> {
        let mut reqs = Vec::with_capacity(count);
        for _ in 0..count {
            // SAFETY: every request is waited for below (or dropped, which
            // waits, if starting a later one fails); none is leaked.
            let r = unsafe {
                self.endpoint
                    .isend(buf, dest as i32, tag, self.context, vci::SendMode::Standard)
            };
            self.keep(&mut reqs, r, "isend")?;
        }
        self.wait(reqs, "wait for a window of sends")
    }

    fn recv_window(&self, buf: &mut [u8], count: usize, source: usize, tag: i32) -> TResult<()> {
        let (ptr, len) = (buf.as_mut_ptr(), buf.len());
        let mut reqs = Vec::with_capacity(count);
        for _ in 0..count {
            // SAFETY: `ptr` comes from `buf`, borrowed mutably (so touched
            // by nothing else) until this function returns, and every
            // request completes before then: waited for below, or dropped
            // (which waits) when posting a later one fails.
            let r = unsafe {
                self.endpoint
                    .irecv(ptr, len, source as i32, tag, self.context)
            };
            self.keep(&mut reqs, r, "irecv")?;
        }
        self.wait(reqs, "wait for a window of receives")
    }

    fn exchange_window(
        &self,
        sbuf: &[u8],
        rbuf: &mut [u8],
        count: usize,
        peer: usize,
        tag: i32,
    ) -> TResult<()> {
        let (ptr, len) = (rbuf.as_mut_ptr(), rbuf.len());
        let mut reqs = Vec::with_capacity(2 * count);
        for _ in 0..count {
            // SAFETY: as in `recv_window`.
            let r = unsafe {
                self.endpoint
                    .irecv(ptr, len, peer as i32, tag, self.context)
            };
            self.keep(&mut reqs, r, "irecv")?;
        }
        for _ in 0..count {
            // SAFETY: as in `send_window`.
            let r = unsafe {
                self.endpoint.isend(
                    sbuf,
                    peer as i32,
                    tag,
                    self.context,
                    vci::SendMode::Standard,
                )
            };
            self.keep(&mut reqs, r, "isend")?;
        }
        self.wait(reqs, "wait for a window of exchanges")
    }

    fn collective(&self, op: CollOp, send: &[u8], recv: &mut [u8]) -> TResult<()> {
        use hmpi::hmpi_core::collective::SystemOperation;
        use hmpi::traits::{Communicator, CommunicatorCollectives, Root};
        let root = self.world.process_at_rank(0);
        let at_root = self.world.rank() == 0;
        let sum = SystemOperation::sum;
        let r = match op {
            CollOp::Barrier => self.world.barrier(),
            CollOp::Bcast => root.broadcast_into(recv),
            CollOp::Reduce if at_root => root.reduce_into_root(f64s(send)?, f64s_mut(recv)?, sum()),
            CollOp::Reduce => root.reduce_into(f64s(send)?, sum()),
            CollOp::Allreduce => self
                .world
                .all_reduce_into(f64s(send)?, f64s_mut(recv)?, sum()),
            CollOp::Gather if at_root => root.gather_into_root(send, recv),
            CollOp::Gather => root.gather_into(send),
            CollOp::Scatter if at_root => root.scatter_into_root(send, recv),
            CollOp::Scatter => root.scatter_into(recv),
            CollOp::Allgather => self.world.all_gather_into(send, recv),
            CollOp::Alltoall => self.world.all_to_all_into(send, recv),
            CollOp::ReduceScatterBlock => {
                self.world
                    .reduce_scatter_block_into(f64s(send)?, f64s_mut(recv)?, sum())
            }
        };
        r.map_err(|e| self.err(op.name(), e))
    }
}

// ---------------------------------------------------------------------------
// rsmpi

#[cfg(feature = "mpi")]
mod rsmpi {
    //! rsmpi over the MPI this build linked.

    use super::{f64s, f64s_mut, CollOp, TResult, Transport};
    use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
    use mpi::datatype::Equivalence;
    use mpi::ffi;
    use mpi::raw::AsRaw;
    use mpi::topology::{Communicator, SimpleCommunicator};
    use mpi::traits::{Destination, Source};
    use std::os::raw::{c_int, c_void};

    /// The rsmpi backend.
    pub struct Rsmpi {
        label: String,
        world: SimpleCommunicator,
        // Last: dropping it calls MPI_Finalize.
        _universe: mpi::environment::Universe,
    }

    impl Rsmpi {
        /// `MPI_Init` (collective over the mpirun job).
        pub fn open(label: &str) -> TResult<Rsmpi> {
            let universe =
                mpi::initialize().ok_or_else(|| format!("{label}: MPI was already initialised"))?;
            let world = universe.world();
            Ok(Rsmpi {
                label: label.to_owned(),
                world,
                _universe: universe,
            })
        }

        fn check(&self, what: &str, code: c_int) -> TResult<()> {
            if code == ffi::MPI_SUCCESS as c_int {
                Ok(())
            } else {
                Err(format!("{} {what}: MPI error code {code}", self.label))
            }
        }

        fn count(&self, len: usize) -> TResult<c_int> {
            c_int::try_from(len).map_err(|_| format!("{}: {len} bytes is too many", self.label))
        }

        /// Waits for every request of `reqs`.
        fn wait_all(&self, reqs: &mut [ffi::MPI_Request], what: &str) -> TResult<()> {
            // SAFETY: `reqs` holds requests that MPI_Isend/MPI_Irecv
            // returned (or MPI_REQUEST_NULL); statuses are ignored.
            let code = unsafe {
                ffi::MPI_Waitall(
                    reqs.len() as c_int,
                    reqs.as_mut_ptr(),
                    ffi::RSMPI_STATUSES_IGNORE,
                )
            };
            self.check(what, code)
        }

        /// Starts `count` sends of `buf` to `dest`, appending the requests.
        fn start_sends(
            &self,
            buf: &[u8],
            count: usize,
            dest: usize,
            tag: i32,
            reqs: &mut Vec<ffi::MPI_Request>,
        ) -> TResult<()> {
            let n = self.count(buf.len())?;
            for _ in 0..count {
                // SAFETY: a valid request slot is written; `buf` stays
                // borrowed until the caller's MPI_Waitall completes it.
                let mut r = unsafe { ffi::RSMPI_REQUEST_NULL };
                // SAFETY: `buf` is valid for `n` bytes; datatype and
                // communicator are live handles of this MPI.
                let code = unsafe {
                    ffi::MPI_Isend(
                        buf.as_ptr() as *const c_void,
                        n,
                        u8::equivalent_datatype().as_raw(),
                        dest as c_int,
                        tag,
                        self.world.as_raw(),
                        &mut r,
                    )
                };
                self.check("MPI_Isend", code)?;
                reqs.push(r);
            }
            Ok(())
        }

        /// Posts `count` receives into `ptr..ptr+len`, appending the
        /// requests.
        fn start_recvs(
            &self,
            ptr: *mut u8,
            len: usize,
            count: usize,
            source: usize,
            tag: i32,
            reqs: &mut Vec<ffi::MPI_Request>,
        ) -> TResult<()> {
            let n = self.count(len)?;
            for _ in 0..count {
                // SAFETY: a plain handle value.
                let mut r = unsafe { ffi::RSMPI_REQUEST_NULL };
                // SAFETY: `ptr` is writable for `len` bytes until the
                // caller's MPI_Waitall completes the request.
                let code = unsafe {
                    ffi::MPI_Irecv(
                        ptr as *mut c_void,
                        n,
                        u8::equivalent_datatype().as_raw(),
                        source as c_int,
                        tag,
                        self.world.as_raw(),
                        &mut r,
                    )
                };
                self.check("MPI_Irecv", code)?;
                reqs.push(r);
            }
            Ok(())
        }

        /// Waits for what was started, also when starting more failed, so
        /// that MPI never touches a buffer after it was given back.
        fn finish(&self, reqs: &mut [ffi::MPI_Request], r: TResult<()>, what: &str) -> TResult<()> {
            let waited = self.wait_all(reqs, what);
            r.and(waited)
        }
    }

    impl Transport for Rsmpi {
        fn label(&self) -> &str {
            &self.label
        }

        fn rank(&self) -> usize {
            self.world.rank() as usize
        }

        fn size(&self) -> usize {
            self.world.size() as usize
        }

        fn barrier(&self) -> TResult<()> {
            self.world.barrier();
            Ok(())
        }

        fn send(&self, buf: &[u8], dest: usize, tag: i32) -> TResult<()> {
            self.world
                .process_at_rank(dest as i32)
                .send_with_tag(buf, tag);
            Ok(())
        }

        fn recv(&self, buf: &mut [u8], source: usize, tag: i32) -> TResult<()> {
            self.world
                .process_at_rank(source as i32)
                .receive_into_with_tag(buf, tag);
            Ok(())
        }

        fn send_window(&self, buf: &[u8], count: usize, dest: usize, tag: i32) -> TResult<()> {
            let mut reqs = Vec::with_capacity(count);
            let r = self.start_sends(buf, count, dest, tag, &mut reqs);
            self.finish(&mut reqs, r, "MPI_Waitall (sends)")
        }

        fn recv_window(
            &self,
            buf: &mut [u8],
            count: usize,
            source: usize,
            tag: i32,
        ) -> TResult<()> {
            let mut reqs = Vec::with_capacity(count);
            let r = self.start_recvs(buf.as_mut_ptr(), buf.len(), count, source, tag, &mut reqs);
            self.finish(&mut reqs, r, "MPI_Waitall (receives)")
        }

        fn exchange_window(
            &self,
            sbuf: &[u8],
            rbuf: &mut [u8],
            count: usize,
            peer: usize,
            tag: i32,
        ) -> TResult<()> {
            let mut reqs = Vec::with_capacity(2 * count);
            let r = self
                .start_recvs(rbuf.as_mut_ptr(), rbuf.len(), count, peer, tag, &mut reqs)
                .and_then(|()| self.start_sends(sbuf, count, peer, tag, &mut reqs));
            self.finish(&mut reqs, r, "MPI_Waitall (exchange)")
        }

        fn collective(&self, op: CollOp, send: &[u8], recv: &mut [u8]) -> TResult<()> {
            let root = self.world.process_at_rank(0);
            let at_root = self.world.rank() == 0;
            let sum = SystemOperation::sum;
            match op {
                CollOp::Barrier => self.world.barrier(),
                CollOp::Bcast => root.broadcast_into(recv),
                CollOp::Reduce if at_root => {
                    root.reduce_into_root(f64s(send)?, f64s_mut(recv)?, sum())
                }
                CollOp::Reduce => root.reduce_into(f64s(send)?, sum()),
                CollOp::Allreduce => {
                    self.world
                        .all_reduce_into(f64s(send)?, f64s_mut(recv)?, sum())
                }
                CollOp::Gather if at_root => root.gather_into_root(send, recv),
                CollOp::Gather => root.gather_into(send),
                CollOp::Scatter if at_root => root.scatter_into_root(send, recv),
                CollOp::Scatter => root.scatter_into(recv),
                CollOp::Allgather => self.world.all_gather_into(send, recv),
                CollOp::Alltoall => self.world.all_to_all_into(send, recv),
                CollOp::ReduceScatterBlock => {
                    self.world
                        .reduce_scatter_block_into(f64s(send)?, f64s_mut(recv)?, sum())
                }
            }
            Ok(())
        }
    }
}
