//! [`Endpoint`]: this process's handle to the engine.
//!
//! `Endpoint::new` attaches to the node heap (through
//! `shmheap::attach_from_env` unless the process already is attached),
//! creates this rank's VCI with its shared part in the rank's arena,
//! publishes it in registry slot [`crate::slots::VCI_BASE`], waits on the
//! node barrier so that every rank's VCI is published before the first send,
//! and looks up every peer's VCI. Ranks are the node segment's local ranks;
//! `HMPI_RANK` and `HMPI_SIZE`, when set (by the launcher), must agree with
//! them (one node only for now). One endpoint per process, for the
//! process's life: its shared part is never freed (peers may still use it)
//! and a second `Endpoint::new` is [`Error::AlreadyInitialized`], even after
//! the first is dropped.
//!
//! # Example
//! ```
//! use vci::{Endpoint, PROC_NULL, ANY_TAG};
//!
//! let ep = Endpoint::new().unwrap(); // without a launcher: a world of one
//! assert_eq!((ep.rank(), ep.size()), (0, 1));
//! // Operations on PROC_NULL complete at once.
//! let st = ep.recv(&mut [0u8; 4], PROC_NULL, 3, 0).unwrap();
//! assert_eq!((st.source, st.tag, st.count), (PROC_NULL, ANY_TAG, 0));
//! // A message to oneself.
//! // SAFETY: the request is waited for below, never leaked.
//! let r = unsafe { ep.isend(b"abc", 0, 1, 0) }.unwrap();
//! let mut buf = [0u8; 3];
//! ep.recv(&mut buf, 0, 1, 0).unwrap();
//! r.wait().unwrap();
//! assert_eq!(&buf, b"abc");
//! ```

use crate::config::Config;
use crate::envelope::{alloc_bounce, free_bounce, Envelope, Header, Protocol, FLAG_SYN, FLAG_SYNC};
use crate::error::{Error, Result};
use crate::message::Message;
use crate::request::{Request, Status};
use crate::slots;
use crate::vci::{Stats, Target, Vci, VciShared, VCI_MAGIC};
use crate::{ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};
use shmheap::{Segment, ShmHeap};
use std::alloc::Layout;
use std::sync::atomic::{AtomicBool, Ordering};

/// The job-wide rank the launcher gives each process.
const RANK_VAR: &str = "HMPI_RANK";
/// The job's number of ranks (set by the launcher).
const SIZE_VAR: &str = "HMPI_SIZE";

/// Set once an endpoint exists in this process.
static CREATED: AtomicBool = AtomicBool::new(false);

/// This process's handle to the engine: its rank, the job's size, its VCI
/// and every peer's VCI. `Sync`: any thread may use it.
#[derive(Debug)]
pub struct Endpoint {
    rank: u32,
    size: u32,
    config: Config,
    seg: Segment,
    vci: Vci,
    /// VCI 0 of every rank, by rank.
    peers: Vec<&'static VciShared>,
}

impl Endpoint {
    /// The endpoint of this process, with the configuration from the
    /// environment (see [`Config`]). Collective: every rank of the node
    /// must call it.
    pub fn new() -> Result<Endpoint> {
        Self::with_config(Config::from_env()?)
    }

    /// Like [`Endpoint::new`], with an explicit configuration.
    pub fn with_config(config: Config) -> Result<Endpoint> {
        // Relaxed: only atomicity matters (one winner); nothing is
        // published through this flag.
        if CREATED.swap(true, Ordering::Relaxed) {
            return Err(Error::AlreadyInitialized);
        }
        Self::create(config).inspect_err(|_| {
            // Relaxed: see above; a failed creation may be retried.
            CREATED.store(false, Ordering::Relaxed);
        })
    }

    fn create(config: Config) -> Result<Endpoint> {
        let seg = match Segment::current() {
            Some(s) => s,
            None => shmheap::attach_from_env()?,
        };
        let (rank, size) = (seg.local_rank(), seg.ranks());
        // One node only for now: the job's ranks are the node's ranks.
        for (var, want) in [(RANK_VAR, rank), (SIZE_VAR, size)] {
            if let Some(v) = std::env::var_os(var) {
                let v = v.to_string_lossy().into_owned();
                if v.trim().parse::<u32>().ok() != Some(want) {
                    return Err(Error::Config {
                        var,
                        value: v,
                        reason: format!(
                            "this process is local rank {rank} of {size} in the node segment; \
                             jobs across nodes are not supported yet"
                        ),
                    });
                }
            }
        }
        if config.cma && size > 1 {
            crate::cma::allow_job_to_read();
        }
        // The CMA table: one byte per rank, all CMA_UNKNOWN (zero).
        let table =
            ShmHeap.try_alloc_zeroed(Layout::array::<u8>(size as usize).map_err(|_| {
                Error::Config {
                    var: SIZE_VAR,
                    value: size.to_string(),
                    reason: "too many ranks".into(),
                }
            })?)?;
        let layout = Layout::new::<VciShared>();
        let p = ShmHeap.try_alloc(layout)?.cast::<VciShared>();
        let mut vs = VciShared::new(rank, 0);
        vs.set_cma(std::process::id(), table.as_ptr() as u64, size);
        // SAFETY: a fresh block of the right size and alignment; nobody
        // else knows its address until it is published below.
        unsafe { p.as_ptr().write(vs) };
        // SAFETY: initialised above; never freed (other ranks may use it as
        // long as they live), so the reference is valid for 'static.
        let shared: &'static VciShared = unsafe { &*p.as_ptr() };
        let slot = slots::vci_slot(0).expect("VCI 0 has a slot");
        seg.publish(slot, p.as_ptr() as u64);
        seg.barrier();
        let mut peers = Vec::with_capacity(size as usize);
        for r in 0..size {
            let addr = seg.wait_lookup(r, slot);
            if shmheap::owner_of(addr as *const u8) != Some(r)
                || addr % std::mem::align_of::<VciShared>() as u64 != 0
            {
                return Err(Error::BadPeer { rank: r, addr });
            }
            // SAFETY: rank r published (Release, read by `wait_lookup` with
            // Acquire) the address of its initialised VciShared in its own
            // arena (checked above), which is never freed.
            let peer: &'static VciShared = unsafe { &*(addr as *const VciShared) };
            if !peer.is_valid(r, 0) {
                return Err(Error::BadPeer { rank: r, addr });
            }
            peers.push(peer);
        }
        // Kernel-assisted copy: find out once per peer whether we may read
        // its memory (we read its VCI's magic), and tell the senders.
        for (r, peer) in peers.iter().enumerate() {
            let yes = config.cma
                && crate::cma::can_read(peer.pid(), peer.magic_addr(), &VCI_MAGIC.to_ne_bytes());
            shared.set_can_read(r as u32, yes);
        }
        // Every table is filled before anyone sends.
        seg.barrier();
        // A given block can be kept as it is if our global allocator is the
        // node heap (it can free the block): see where a fresh box lands.
        let keep_given = shmheap::is_shared(&*Box::new(0u64));
        Ok(Endpoint {
            rank,
            size,
            vci: Vci::new(shared, &config, keep_given),
            config,
            seg,
            peers,
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> i32 {
        self.rank as i32
    }

    /// The number of ranks.
    pub fn size(&self) -> i32 {
        self.size as i32
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// This process's VCI.
    pub fn vci(&self) -> &Vci {
        &self.vci
    }

    /// The per-protocol counters of this process's VCI.
    pub fn stats(&self) -> Stats {
        self.vci.stats()
    }

    /// Whether a send of a private buffer (outside the node heap, above
    /// `eager_max`) to `dest` uses the kernel-assisted single copy: CMA is
    /// on here and `dest` found at start-up that it can read this process.
    /// `false` for an invalid rank.
    pub fn kernel_assisted_to(&self, dest: i32) -> bool {
        self.config.cma
            && self
                .check_rank(dest)
                .is_ok_and(|d| self.peers[d as usize].can_read_rank(self.rank))
    }

    /// The node barrier. It does **not** drive progress: complete the
    /// requests that peers wait for before entering it.
    pub fn barrier(&self) {
        self.seg.barrier();
    }

    fn check_rank(&self, rank: i32) -> Result<u32> {
        if rank >= 0 && (rank as u32) < self.size {
            Ok(rank as u32)
        } else {
            Err(Error::Rank {
                rank,
                size: self.size,
            })
        }
    }

    /// The shared part of `dest`'s VCI, for a send.
    pub(crate) fn peer(&self, dest: i32) -> Result<&'static VciShared> {
        Ok(self.peers[self.check_rank(dest)? as usize])
    }

    /// Validates a receive's or probe's source and tag.
    pub(crate) fn check_recv_key(&self, source: i32, tag: i32) -> Result<()> {
        if source != ANY_SOURCE && source != PROC_NULL {
            self.check_rank(source)?;
        }
        if tag != ANY_TAG && !(0..=TAG_UB).contains(&tag) {
            return Err(Error::Tag { tag });
        }
        Ok(())
    }

    /// Starts sending `buf` to `dest` with `tag` in communicator context
    /// `context`. Payloads up to `eager_max` bytes travel inline and the
    /// request is complete at once; larger ones in the node heap are copied
    /// once by the receiver (the request completes when it has; large ones
    /// synergistically, see [`crate::envelope`]); larger ones elsewhere are
    /// read by the receiver with `process_vm_readv` when it can read this
    /// process (kernel assisted, see [`crate::cma`]; the request completes
    /// when it has), else first copied into a heap bounce buffer (complete
    /// at once).
    ///
    /// # Safety
    /// The returned request must be completed ([`Request::wait`], a
    /// [`Request::test`] that reports completion, [`wait_all`](crate::wait_all))
    /// or dropped (which waits): it must not be leaked (`mem::forget`, a
    /// reference cycle), because the receiver may read `buf` until the
    /// request completes. A scope API that makes this a compile-time
    /// guarantee is planned; the blocking [`Endpoint::send`] is safe.
    pub unsafe fn isend<'a>(
        &'a self,
        buf: &'a [u8],
        dest: i32,
        tag: i32,
        context: u32,
    ) -> Result<Request<'a>> {
        self.start_send(buf, dest, tag, context, false)
    }

    /// Starts a synchronous send: like [`Endpoint::isend`], but the request
    /// completes only once the receiver has matched the message (and
    /// copied it), whatever the protocol (MPI's `MPI_Issend`).
    ///
    /// # Safety
    /// As for [`Endpoint::isend`]. The blocking [`Endpoint::ssend`] is safe.
    pub unsafe fn issend<'a>(
        &'a self,
        buf: &'a [u8],
        dest: i32,
        tag: i32,
        context: u32,
    ) -> Result<Request<'a>> {
        self.start_send(buf, dest, tag, context, true)
    }

    /// Sends synchronously and waits (see [`Endpoint::issend`]): returns
    /// once the receiver has matched the message. A synchronous send to
    /// oneself without a receive posted first (by another thread) never
    /// returns, as in MPI.
    pub fn ssend(&self, buf: &[u8], dest: i32, tag: i32, context: u32) -> Result<()> {
        // SAFETY: the request is waited for at once, never leaked.
        unsafe { self.issend(buf, dest, tag, context) }?
            .wait()
            .map(drop)
    }

    fn start_send<'a>(
        &'a self,
        buf: &'a [u8],
        dest: i32,
        tag: i32,
        context: u32,
        sync: bool,
    ) -> Result<Request<'a>> {
        if !(0..=TAG_UB).contains(&tag) {
            return Err(Error::Tag { tag });
        }
        if dest == PROC_NULL {
            return Ok(Request::complete(self, Status::empty()));
        }
        let peer = self.peer(dest)?;
        let len = buf.len();
        let protocol = if len <= self.config.eager_max {
            Protocol::Immediate
        } else if shmheap::is_shared(buf.as_ptr()) && shmheap::is_shared(&buf[len - 1]) {
            Protocol::SingleCopy
        } else if self.config.cma && peer.can_read_rank(self.rank) {
            Protocol::KernelAssisted
        } else {
            Protocol::TwoCopy
        };
        let mut h = Header {
            source: self.rank,
            tag,
            context,
            protocol,
            len: len as u64,
            data: 0,
            reply: self.vci.shared() as *const VciShared as u64,
            flags: if sync { FLAG_SYNC } else { 0 },
            pid: 0,
        };
        let env = match protocol {
            Protocol::Immediate => Envelope::create(h, buf)?,
            Protocol::SingleCopy => {
                h.data = buf.as_ptr() as u64;
                h.flags |= FLAG_SYN;
                Envelope::create(h, &[])?
            }
            Protocol::KernelAssisted => {
                h.data = buf.as_ptr() as u64;
                h.pid = self.vci.shared().pid();
                Envelope::create(h, &[])?
            }
            Protocol::TwoCopy => {
                let bounce = alloc_bounce(buf)?;
                h.data = bounce.as_ptr() as u64;
                Envelope::create(h, &[]).inspect_err(|_| {
                    // SAFETY: the bounce buffer was allocated above for
                    // `len` bytes and is referenced by nothing.
                    unsafe { free_bounce(bounce, len) }
                })?
            }
            // Never chosen above: ownership passing has its own entry point.
            Protocol::Owned => {
                return Err(Error::Block {
                    reason: "a plain send carries no block",
                })
            }
        };
        // SAFETY: a fresh envelope in the node heap, not queued; after the
        // push only the receiver touches it until it completes it (single
        // copy, kernel assisted, synchronous) or frees it (the others).
        unsafe { peer.deliver(env) };
        self.vci.count_send(protocol, sync);
        let status = Status {
            source: dest,
            tag,
            count: len as u64,
            error: None,
            cancelled: false,
        };
        let sender_frees =
            sync || matches!(protocol, Protocol::SingleCopy | Protocol::KernelAssisted);
        Ok(if sender_frees {
            Request::send(self, env, status)
        } else {
            Request::complete(self, status)
        })
    }

    /// Starts receiving into `buf` a message from `source` (a rank,
    /// [`ANY_SOURCE`] or [`PROC_NULL`]) with `tag` (or [`ANY_TAG`]) in
    /// communicator context `context`.
    ///
    /// # Safety
    /// As for [`Endpoint::isend`]: the request must be completed or dropped,
    /// never leaked, because the engine writes into `buf` until the receive
    /// completes or is cancelled. The blocking [`Endpoint::recv`] is safe.
    pub unsafe fn irecv<'a>(
        &'a self,
        buf: &'a mut [u8],
        source: i32,
        tag: i32,
        context: u32,
    ) -> Result<Request<'a>> {
        self.check_recv_key(source, tag)?;
        if source == PROC_NULL {
            return Ok(Request::complete(self, Status::empty()));
        }
        // SAFETY: `buf` is borrowed mutably for 'a by the request, which
        // collects the receive's slot before it ends (waiting on drop).
        let id = unsafe {
            self.vci.post_recv(
                Target::Buffer {
                    buf: buf.as_mut_ptr(),
                    cap: buf.len(),
                },
                source,
                tag,
                context,
            )
        };
        Ok(Request::recv(self, id))
    }

    /// Starts receiving into the `len` bytes at `buf`: [`Endpoint::irecv`]
    /// for memory that no Rust reference can describe, as MPI's
    /// `MPI_Irecv` takes a raw pointer. Pending receives may name the same
    /// memory (the OSU bandwidth benchmarks post a whole window of
    /// receives into one buffer); it then holds whichever of their
    /// messages was copied last.
    ///
    /// # Safety
    /// `buf` is non-null and valid for writes of `len` bytes until the
    /// request completes or is cancelled, and nothing but the engine reads
    /// or writes that memory meanwhile; the request must be completed or
    /// dropped, never leaked (as for [`Endpoint::irecv`]).
    pub unsafe fn irecv_raw<'a>(
        &'a self,
        buf: *mut u8,
        len: usize,
        source: i32,
        tag: i32,
        context: u32,
    ) -> Result<Request<'a>> {
        self.check_recv_key(source, tag)?;
        if source == PROC_NULL {
            return Ok(Request::complete(self, Status::empty()));
        }
        let target = Target::Buffer { buf, cap: len };
        // SAFETY: the caller keeps `buf` writable for `len` bytes and
        // untouched until the request, which collects the receive's slot
        // before it ends (waiting on drop), completes.
        let id = unsafe { self.vci.post_recv(target, source, tag, context) };
        Ok(Request::recv(self, id))
    }

    /// Sends and waits (see [`Endpoint::isend`]).
    pub fn send(&self, buf: &[u8], dest: i32, tag: i32, context: u32) -> Result<()> {
        // SAFETY: the request is waited for at once, never leaked.
        unsafe { self.isend(buf, dest, tag, context) }?
            .wait()
            .map(drop)
    }

    /// Receives and waits (see [`Endpoint::irecv`]).
    pub fn recv(&self, buf: &mut [u8], source: i32, tag: i32, context: u32) -> Result<Status> {
        // SAFETY: the request is waited for at once, never leaked.
        unsafe { self.irecv(buf, source, tag, context) }?.wait()
    }

    /// The status of the earliest message that a receive with this key
    /// would match now, without receiving it; `None` if there is none.
    pub fn iprobe(&self, source: i32, tag: i32, context: u32) -> Result<Option<Status>> {
        self.check_recv_key(source, tag)?;
        if source == PROC_NULL {
            return Ok(Some(Status::empty()));
        }
        let mut guard = self.vci.lock();
        Ok(self.vci.iprobe(&mut guard, source, tag, context))
    }

    /// Waits until a message matches, and returns its status without
    /// receiving it.
    pub fn probe(&self, source: i32, tag: i32, context: u32) -> Result<Status> {
        self.check_recv_key(source, tag)?;
        if source == PROC_NULL {
            return Ok(Status::empty());
        }
        Ok(self
            .vci
            .wait_for(|vci, p| vci.iprobe(p, source, tag, context)))
    }

    /// A matched probe: takes the earliest message a receive with this key
    /// would match now off the matching lists and returns it with its
    /// status; `None` if there is none. Only the returned [`Message`] can
    /// receive it (see [`crate::message`]).
    pub fn improbe(
        &self,
        source: i32,
        tag: i32,
        context: u32,
    ) -> Result<Option<(Message<'_>, Status)>> {
        self.check_recv_key(source, tag)?;
        if source == PROC_NULL {
            return Ok(Some((
                Message::new(self, None, Status::empty()),
                Status::empty(),
            )));
        }
        let mut guard = self.vci.lock();
        Ok(self
            .vci
            .take_unexpected(&mut guard, source, tag, context)
            .map(|(env, st)| (Message::new(self, Some(env), st), st)))
    }

    /// Waits until a message matches, and takes it as [`Endpoint::improbe`]
    /// does.
    pub fn mprobe(&self, source: i32, tag: i32, context: u32) -> Result<(Message<'_>, Status)> {
        self.check_recv_key(source, tag)?;
        if source == PROC_NULL {
            return Ok((Message::new(self, None, Status::empty()), Status::empty()));
        }
        let (env, st) = self
            .vci
            .wait_for(|vci, p| vci.take_unexpected(p, source, tag, context));
        Ok((Message::new(self, Some(env), st), st))
    }

    /// Waits for every request (see [`crate::wait_all`]).
    pub fn wait_all<'a>(
        &'a self,
        requests: impl IntoIterator<Item = Request<'a>>,
    ) -> Result<Vec<Status>> {
        crate::request::wait_all(requests)
    }
}
