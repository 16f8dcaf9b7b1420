//! [`Endpoint`]: this process's handle to the engine.
//!
//! `Endpoint::new` attaches to the node heap (through
//! `shmheap::attach_from_env` unless the process already is attached),
//! creates this rank's VCIs ([`Config::vcis`]) with their shared parts and
//! fast-box rings in the rank's arena, publishes VCI `i` in registry slot
//! [`crate::slots::vci_slot`]`(i)`, waits on the node barrier so that every
//! rank's VCIs are published before the first send, and looks up every
//! peer's VCIs.
//!
//! A message travels on the VCI of its context word: context `c` uses VCI
//! `(c / 2) % vcis` in both ranks (contexts come in pairs, a
//! communicator's point-to-point and internal contexts `2k` and `2k + 1`,
//! which share a VCI), so matching (per context) stays within one VCI,
//! and threads working on consecutive communicators take different
//! locks; a word made by [`on_vci`] names its VCI instead, which spreads
//! one communicator's traffic (a receive matches only words equal to its
//! own, so what a message and its receive name must agree); a receive or
//! probe whose word is made by [`on_every_vci`] looks on every VCI, for
//! messages sent on their thread's VCI ([`Endpoint::thread_vci`]; see
//! `spread.rs`). Each rank has one doorbell (in its VCI 0): whoever
//! waits sleeps there, and a waiter sweeps the other VCIs of its process
//! now and then, so no request starves behind a VCI nobody waits on. Ranks are the node segment's local ranks;
//! `HMPI_RANK` and `HMPI_SIZE`, when set (by the launcher), must agree with
//! them (one node only for now). One endpoint per process, for the
//! process's life: its shared part is never freed (peers may still use it)
//! and a second `Endpoint::new` is [`Error::AlreadyInitialized`], even after
//! the first is dropped.
//!
//! # Example
//! ```
//! use vci::{Endpoint, SendMode, Status, PROC_NULL, ANY_TAG};
//!
//! let ep = Endpoint::new().unwrap(); // without a launcher: a world of one
//! assert_eq!((ep.rank(), ep.size()), (0, 1));
//! // Operations on PROC_NULL complete at once.
//! let mut st = Status::empty();
//! ep.recv(&mut [0u8; 4], PROC_NULL, 3, 0, &mut st).unwrap();
//! assert_eq!((st.source, st.tag, st.count), (PROC_NULL, ANY_TAG, 0));
//! // A message to oneself.
//! // SAFETY: the request is waited for below, never leaked.
//! let r = unsafe { ep.isend(b"abc", 0, 1, 0, SendMode::Standard) }.unwrap();
//! let mut buf = [0u8; 3];
//! ep.recv(&mut buf, 0, 1, 0, &mut st).unwrap();
//! assert_eq!(st.error, None);
//! r.wait().unwrap();
//! assert_eq!(&buf, b"abc");
//! ```

use crate::config::Config;
use crate::envelope::{Envelope, Header, Protocol, FLAG_SYN, FLAG_SYNC};
use crate::error::{Error, Result};
use crate::fastbox::{FbPair, Lane, FB_SPAN_MAX};
use crate::liveness::{Liveness, Watch};
use crate::matching::{Arrival, Key, Target};
use crate::message::Message;
use crate::request::{Request, Status};
use crate::slots;
use crate::two_copy::{alloc_bounce, free_bounce};
use crate::vci::{Posted, Vci, VciShared, VCI_MAGIC};
use crate::{ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};
use shmheap::{Segment, ShmHeap};
use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

/// The job-wide rank the launcher gives each process.
const RANK_VAR: &str = "HMPI_RANK";
/// The job's number of ranks (set by the launcher).
const SIZE_VAR: &str = "HMPI_SIZE";

/// Set once an endpoint exists in this process.
static CREATED: AtomicBool = AtomicBool::new(false);

/// The largest communicator context that a context word carries (its
/// low 25 bits); the three bits above name the sending endpoint
/// ([`from_sender`]), the four above those a VCI ([`on_vci`]).
pub const CONTEXT_MAX: u32 = (1 << SENDER_SHIFT) - 1;

/// Where a context word keeps the number of the VCI it names.
pub(crate) const VCI_SHIFT: u32 = 28;

/// Where a context word keeps the index of the sending endpoint among its
/// process's endpoints ([`from_sender`]).
const SENDER_SHIFT: u32 = 25;

/// The context word's bits of the sending endpoint's index.
pub(crate) const SENDER_BITS: u32 = 0x7 << SENDER_SHIFT;

/// How many endpoints of one process a context word tells apart
/// ([`from_sender`]).
pub const SENDERS: u32 = 8;

/// How far apart the sources are that a status names for the endpoints of
/// one process: a message whose context word names sending endpoint `j`
/// ([`from_sender`]) of rank `r` reports source `r + j * SENDER_STRIDE`
/// (see [`status_source`]).
pub const SENDER_STRIDE: i32 = shmheap::segment::MAX_RANKS as i32;

/// The context word `context` (its context and VCI) sent by endpoint `j`
/// (`j < SENDERS`) of its process: a layer that lets several endpoints
/// of a process be ranks of one communicator (hmpi-core's thread
/// endpoints) tells them apart this way.
///
/// A receive from one rank matches only the words of the endpoint it
/// names (the words must be equal); a receive from [`crate::ANY_SOURCE`]
/// whose own word names endpoint 0 matches the words of every sending
/// endpoint, and the status of a message names its sender as
/// `rank + j * SENDER_STRIDE` ([`status_source`]). Index 0 is the plain
/// word, so a layer that never names another endpoint sees no change.
///
/// ```
/// use vci::endpoint::{from_sender, on_vci, sender_of, CONTEXT_MAX};
/// let w = on_vci(from_sender(6, 3), 2);
/// assert_eq!((w & CONTEXT_MAX, sender_of(w)), (6, 3));
/// assert_eq!(from_sender(6, 0), 6);
/// ```
#[inline(always)]
pub const fn from_sender(context: u32, j: u32) -> u32 {
    (context & !SENDER_BITS) | ((j & 0x7) << SENDER_SHIFT)
}

/// The index of the sending endpoint that context word `context` names
/// ([`from_sender`]; 0 for a plain word).
#[inline(always)]
pub const fn sender_of(context: u32) -> u32 {
    (context & SENDER_BITS) >> SENDER_SHIFT
}

/// The source a status names for a message from rank `source` whose
/// context word is `context`: `source + sender_of(context) *`
/// [`SENDER_STRIDE`] (the rank itself for a plain word).
#[inline(always)]
pub const fn status_source(source: i32, context: u32) -> i32 {
    source + sender_of(context) as i32 * SENDER_STRIDE
}

/// The context word of communicator context `context` (at most
/// [`CONTEXT_MAX`], with the bits of its sending endpoint if
/// [`from_sender`] gave them) that travels on VCI `v` (`v < vci_count()`, at most
/// [`crate::slots::MAX_VCIS`] − 1) instead of the one [`Endpoint::vci_of`]
/// would give `context`.
///
/// The word is what messages carry and receives match, so a send and a
/// receive meet only if both name the same VCI: the layer that picks `v`
/// (hmpi-core's communicator hints and streams) must pick it from what
/// both sides know.
///
/// ```
/// let w = vci::endpoint::on_vci(6, 3);
/// assert_ne!(w, 6);
/// assert_eq!(w & vci::endpoint::CONTEXT_MAX, 6);
/// ```
#[inline(always)]
pub const fn on_vci(context: u32, v: usize) -> u32 {
    (context & ((1 << VCI_SHIFT) - 1)) | (((v as u32 & 0x7) + 1) << VCI_SHIFT)
}

pub use crate::spread::{is_every_vci, on_every_vci, thread_index};

/// How [`Endpoint::isend`] and [`Endpoint::send`] complete a send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    /// As soon as the send buffer may be reused (MPI's standard mode):
    /// small messages complete at once, through a fast box or inline.
    Standard,
    /// Only once the receiver has matched the message (and copied it),
    /// whatever the protocol (MPI's synchronous mode, `MPI_Ssend`).
    Synchronous,
}

/// How [`Endpoint::irecv_raw_or_in`] started a receive, or
/// [`Endpoint::isend_or_in`] a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// It finished at once (a receive that matched, a send that needs
    /// nothing more of its buffer): its status (no request).
    Finished(Status),
    /// It waits: its request was written where the place said.
    Written,
    /// It would have waited, but there was no place for its request:
    /// nothing started.
    NoPlace,
}

/// What [`Endpoint::begin_send`] made of a send.
enum Begun<P, E> {
    /// Nothing more to do (the payload travelled inline, or went to a
    /// bounce buffer, or `dest` is `PROC_NULL`): the VCI and the status.
    Complete(usize, Status),
    /// Posted; the receiver reads the sender's buffer, so the sender
    /// frees the envelope once the receiver is done with it: the VCI, the
    /// envelope, the status, and the place its caller gave for the
    /// request.
    Pending {
        v: usize,
        env: NonNull<Envelope>,
        status: Status,
        place: P,
    },
    /// It would have had to wait, but its caller had no place for its
    /// request (why): nothing was sent.
    NoPlace(E),
}

/// This process's handle to the engine: its rank, the job's size, its VCIs
/// and every peer's VCIs. `Sync`: any thread may use it.
#[derive(Debug)]
pub struct Endpoint {
    pub(crate) rank: u32,
    size: u32,
    pub(crate) config: Config,
    seg: Segment,
    /// This process's VCIs, by number.
    pub(crate) vcis: Vec<Vci>,
    /// Every rank's VCIs: entry `r * vcis + v` is VCI `v` of rank `r`.
    peers: Vec<&'static VciShared>,
    /// Send lanes: entry `r * vcis + v` orders this process's messages to
    /// VCI `v` of rank `r` (see [`crate::fastbox`]).
    pub(crate) lanes: Vec<Lane>,
    /// Messages shorter than this may go through a fast box (0: fast
    /// boxes are off).
    pub(crate) fastbox_below: usize,
    /// Whether the peers are alive (asked only by sleeping waiters).
    live: Liveness,
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
        // For the launcher: from now on this rank's peers wait for it.
        seg.set_rank_state(shmheap::segment::RankState::Initializing);
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
            crate::kernel_assisted::allow_job_to_read();
        }
        // The CMA table: one byte per rank, all CMA_UNKNOWN (zero).
        let too_many = || Error::Config {
            var: SIZE_VAR,
            value: size.to_string(),
            reason: "too many ranks".into(),
        };
        let table = ShmHeap
            .try_alloc_zeroed(Layout::array::<u8>(size as usize).map_err(|_| too_many())?)?;
        let nv = config.vcis;
        let mut shareds: Vec<&'static VciShared> = Vec::with_capacity(nv);
        for v in 0..nv {
            // Fast-box rings: all zero is every slot empty, no credit used.
            let fastbox = if config.fastbox {
                let l = Layout::array::<FbPair>(size as usize).map_err(|_| too_many())?;
                ShmHeap.try_alloc_zeroed(l)?.as_ptr() as u64
            } else {
                0
            };
            let p = ShmHeap
                .try_alloc(Layout::new::<VciShared>())?
                .cast::<VciShared>();
            let mut vs = VciShared::new(rank, v as u32);
            let cma = if v == 0 { table.as_ptr() as u64 } else { 0 };
            vs.set_tables(std::process::id(), cma, fastbox, size, nv as u32);
            // SAFETY: a fresh block of the right size and alignment; nobody
            // else knows its address until it is published below.
            unsafe { p.as_ptr().write(vs) };
            // SAFETY: initialised above; never freed (other ranks may use it
            // as long as they live), so the reference is valid for 'static.
            shareds.push(unsafe { &*p.as_ptr() });
            let slot = slots::vci_slot(v).expect("config.vcis <= MAX_VCIS");
            seg.publish(slot, p.as_ptr() as u64);
        }
        // A peer that ends before it arrives fails init (no launcher may
        // be watching).
        seg.barrier_or(|| crate::liveness::ended_in_init(&seg, rank))
            .map_err(|rank| Error::ProcFailed { rank })?;
        let mut peers = Vec::with_capacity(size as usize * nv);
        for r in 0..size {
            for v in 0..nv {
                let peer = lookup_vci(&seg, r, v)?;
                if v == 0 && peer.vcis() != nv as u32 {
                    return Err(Error::Config {
                        var: crate::config::VCIS_VAR,
                        value: nv.to_string(),
                        reason: format!(
                            "rank {r} has {} VCIs; every rank needs the same number",
                            peer.vcis()
                        ),
                    });
                }
                peers.push(peer);
            }
        }
        let shared = shareds[0];
        // Kernel-assisted copy: find out once per peer whether we may read
        // its memory (we read its VCI's magic), and tell the senders.
        for r in 0..size {
            let peer = peers[r as usize * nv];
            let yes = config.cma
                && crate::kernel_assisted::can_read(
                    peer.pid(),
                    peer.magic_addr(),
                    &VCI_MAGIC.to_ne_bytes(),
                );
            shared.set_can_read(r, yes);
        }
        // Every peer published its process id, and is alive (it reached
        // the barrier above).
        let pids: Vec<u32> = (0..size).map(|r| peers[r as usize * nv].pid()).collect();
        let live = Liveness::new(seg, rank, &pids);
        // Out of init's wait for the peers (the runtime above marks the
        // word on), before the barrier: a peer that leaves right after it
        // does not see this rank still initializing.
        seg.set_rank_state(shmheap::segment::RankState::Attached);
        // Every table is filled before anyone sends.
        seg.barrier_or(|| live.check(Watch::Any))
            .map_err(|rank| Error::ProcFailed { rank })?;
        // A given block can be kept as it is if our global allocator is the
        // node heap (it can free the block): see where a fresh box lands.
        let keep_given = shmheap::is_shared(&*Box::new(0u64));
        // The locks below are biased to this thread (see `crate::solo`).
        crate::solo::SOLO.claim(config.solo);
        Ok(Endpoint {
            rank,
            size,
            vcis: shareds
                .iter()
                .map(|&vs| Vci::new(vs, &config, keep_given))
                .collect(),
            lanes: peers
                .iter()
                .map(|p| Lane::new(p.fastbox_from(rank)))
                .collect(),
            fastbox_below: if config.fastbox { FB_SPAN_MAX + 1 } else { 0 },
            config,
            seg,
            peers,
            live,
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

    /// Whether solo mode is on: the thread that created the endpoint takes
    /// the VCI and lane locks without locked instructions, because no other
    /// thread has communicated yet (see [`Config::solo`]). It ends for good
    /// when another thread first communicates.
    pub fn solo(&self) -> bool {
        !crate::solo::SOLO.is_multi()
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// This process's VCI 0.
    pub fn vci(&self) -> &Vci {
        &self.vcis[0]
    }

    /// How many VCIs this process has (the same in every rank).
    pub fn vci_count(&self) -> usize {
        self.vcis.len()
    }

    /// The number of the VCI that carries context word `context`: the VCI
    /// it names ([`on_vci`]), or else `(context / 2) % vci_count()`:
    /// contexts come in pairs (a communicator's point-to-point and
    /// internal contexts, `2k` and `2k + 1`) that share a VCI, and
    /// consecutive pairs take consecutive VCIs. (`context % n` would put
    /// every communicator's point-to-point traffic on the even VCIs.)
    #[inline]
    pub fn vci_of(&self, context: u32) -> usize {
        match self.vcis.len() {
            // The default: no division on the message path.
            1 => 0,
            n => match context >> VCI_SHIFT {
                // A power of two (the usual count) masks: a division costs
                // tens of cycles on a message path of a few nanoseconds.
                0 if n.is_power_of_two() => (context >> 1) as usize & (n - 1),
                0 => (context >> 1) as usize % n,
                // A named VCI is below the count (`on_vci`'s contract): no
                // division on a stream's or an endpoint's message path.
                named if (named as usize) <= n => named as usize - 1,
                named => (named as usize - 1) % n,
            },
        }
    }

    /// This process's VCI number `v` (`v < vci_count()`).
    pub(crate) fn vci_at(&self, v: usize) -> &Vci {
        &self.vcis[v]
    }

    /// Whether the peers are alive (see [`crate::liveness`]).
    pub(crate) fn liveness(&self) -> &Liveness {
        &self.live
    }

    /// Whether rank `rank` has failed: its process ended without
    /// finalizing (see [`crate::liveness`]). Costs a system call: not for
    /// a message path.
    pub fn peer_failed(&self, rank: i32) -> bool {
        u32::try_from(rank).is_ok_and(|r| self.live.failed(r))
    }

    /// Says which ranks may send in `context` (the members of a
    /// communicator, by rank here): a receive from any source in it fails
    /// only once all of them have failed (see [`crate::liveness`]). A
    /// context nobody described counts every rank of the job.
    pub fn set_senders(&self, context: u32, ranks: &[u32]) {
        self.live.set_senders(context, ranks);
    }

    /// This rank's doorbell (in its VCI 0).
    pub(crate) fn bell(&self) -> &'static VciShared {
        self.vcis[0].shared()
    }

    /// Numbers `env` and queues it for VCI `v` of rank `dest` in this
    /// process's send order, then rings `dest`'s doorbell. The message is
    /// counted (sent with `protocol`, synchronous if `sync`) under the
    /// lane lock, as fast-box sends are (not with an atomic add: see
    /// docs/performance.md, "Locked instructions").
    ///
    /// # Safety
    ///
    /// As for [`VciShared::push`]: `env` is fresh, in the node heap, and
    /// belongs to the receiver from now on.
    #[inline(always)]
    pub(crate) unsafe fn post(
        &self,
        dest: u32,
        v: usize,
        env: NonNull<Envelope>,
        protocol: Protocol,
        sync: bool,
    ) {
        let i = self.lane_index(dest, v);
        {
            let mut lane = self.lanes[i].lock();
            Envelope::set_seq(env, lane.next);
            lane.next += 1;
            lane.queued[protocol as usize - 1] += 1;
            lane.synchronous += u64::from(sync);
            // SAFETY: the caller's contract; numbered above.
            unsafe { self.peers[i].push(env) };
        }
        self.peer0(dest).ring();
    }

    /// The index of VCI `v` of rank `dest` in `peers` and `lanes`.
    pub(crate) fn lane_index(&self, dest: u32, v: usize) -> usize {
        dest as usize * self.vcis.len() + v
    }

    /// The node barrier. It does **not** drive progress: complete the
    /// requests that peers wait for before entering it.
    pub fn barrier(&self) {
        self.seg.barrier();
    }

    pub(crate) fn check_rank(&self, rank: i32) -> Result<u32> {
        if rank >= 0 && (rank as u32) < self.size {
            Ok(rank as u32)
        } else {
            Err(Error::Rank {
                rank,
                size: self.size,
            })
        }
    }

    /// The shared part of `dest`'s VCI 0 (its doorbell and CMA table).
    pub(crate) fn peer0(&self, dest: u32) -> &'static VciShared {
        self.peers[self.lane_index(dest, 0)]
    }

    /// Validates a receive's or probe's source and tag: `None` for
    /// `PROC_NULL`, else the number of the context's VCI and the matching
    /// key.
    fn recv_key(&self, source: i32, tag: i32, context: u32) -> Result<Option<(usize, Key)>> {
        self.check_recv_key(source, tag)?;
        if source == PROC_NULL {
            return Ok(None);
        }
        let key = Key {
            source,
            tag,
            context,
        };
        Ok(Some((self.vci_of(context), key)))
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
    /// process (kernel assisted, see [`crate::kernel_assisted`]; the request completes
    /// when it has), else first copied into a heap bounce buffer (complete
    /// at once).
    ///
    /// With [`SendMode::Synchronous`] the request completes only once the
    /// receiver has matched the message (and copied it), whatever the
    /// protocol (MPI's `MPI_Issend`).
    ///
    /// # Safety
    /// The returned request must be completed ([`Request::wait`], a
    /// [`Request::test`] that reports completion, [`wait_all`](crate::wait_all))
    /// or dropped (which waits): it must not be leaked (`mem::forget`, a
    /// reference cycle), because the receiver may read `buf` until the
    /// request completes. A scope API that makes this a compile-time
    /// guarantee is planned; the blocking [`Endpoint::send`] is safe.
    ///
    /// Always inlined, with its fast-box path: the request of a send that
    /// finished at once is then built where the caller keeps it, not
    /// returned through memory and copied (see docs/performance.md,
    /// "Store forwarding"); the general path is out of line.
    #[inline(always)]
    pub unsafe fn isend<'a>(
        &'a self,
        buf: &'a [u8],
        dest: i32,
        tag: i32,
        context: u32,
        mode: SendMode,
    ) -> Result<Request<'a>> {
        if mode == SendMode::Synchronous {
            return self.isend_sync(buf, dest, tag, context);
        }
        // A tiny message goes into the fast box here, and its request is
        // complete; the general path (with its larger frame) is for the
        // rest.
        if let Some(v) = self.send_through_fastbox(buf, dest, tag, context)? {
            return Ok(Request::complete(self, v, sent(dest, tag, buf.len())));
        }
        self.start_send(buf, dest, tag, context, false)
    }

    /// [`Endpoint::isend`] in [`SendMode::Synchronous`]: the general path
    /// at once (a synchronous send never tries the fast box).
    #[inline(never)]
    fn isend_sync<'a>(
        &'a self,
        buf: &'a [u8],
        dest: i32,
        tag: i32,
        context: u32,
    ) -> Result<Request<'a>> {
        self.start_send(buf, dest, tag, context, true)
    }

    /// [`Endpoint::send`] in [`SendMode::Synchronous`]: returns once the
    /// receiver has matched the message.
    fn send_sync(&self, buf: &[u8], dest: i32, tag: i32, context: u32) -> Result<()> {
        // The request is waited for at once, never leaked.
        self.isend_sync(buf, dest, tag, context)?.wait().map(drop)
    }

    /// A send through an envelope (or none, to `PROC_NULL`): the general
    /// path, which does not try the fast box ([`Endpoint::isend`] and
    /// [`Endpoint::send`] do, first).
    #[inline(never)]
    fn start_send<'a>(
        &'a self,
        buf: &'a [u8],
        dest: i32,
        tag: i32,
        context: u32,
        sync: bool,
    ) -> Result<Request<'a>> {
        let begun = self.begin_send(buf, dest, tag, context, sync, || {
            Ok::<_, std::convert::Infallible>(())
        })?;
        Ok(match begun {
            Begun::Complete(v, status) => Request::complete(self, v, status),
            Begun::Pending { v, env, status, .. } => Request::send(self, v, env, status),
            Begun::NoPlace(never) => match never {},
        })
    }

    /// [`Endpoint::isend`] for a layer that keeps its requests in a table
    /// of its own (the C library's request handles), as
    /// [`Endpoint::irecv_raw_or_in`] is for receives: a send that needs
    /// nothing more of `buf` once started returns its status and leaves no
    /// request behind; one the receiver will read `buf` for asks `place`
    /// for a slot first (before anything is sent) and writes its request
    /// there, where it stays: it is never copied (see docs/performance.md,
    /// "Store forwarding").
    ///
    /// If `place` has no slot, nothing is sent: [`Start::NoPlace`].
    ///
    /// # Safety
    ///
    /// As for [`Endpoint::isend`]; a place `place` returns is valid for a
    /// write of a request, and the request written there is completed or
    /// dropped like one [`Endpoint::isend`] returned.
    #[inline(always)]
    pub unsafe fn isend_or_in<'a>(
        &'a self,
        place: impl FnOnce() -> Option<*mut Request<'a>>,
        buf: &'a [u8],
        dest: i32,
        tag: i32,
        context: u32,
    ) -> Result<Start> {
        if self
            .send_through_fastbox(buf, dest, tag, context)?
            .is_some()
        {
            return Ok(Start::Finished(sent(dest, tag, buf.len())));
        }
        let place = || place().ok_or(());
        Ok(
            match self.begin_send(buf, dest, tag, context, false, place)? {
                Begun::Complete(_, status) => Start::Finished(status),
                Begun::Pending {
                    v,
                    env,
                    status,
                    place: out,
                } => {
                    // SAFETY: `place` gave `out` for a request (the caller's
                    // contract).
                    unsafe { out.write(Request::send(self, v, env, status)) };
                    Start::Written
                }
                Begun::NoPlace(()) => Start::NoPlace,
            },
        )
    }

    /// The general send path's work (see [`Endpoint::start_send`]): checks,
    /// chooses the protocol, builds and posts the envelope. A send whose
    /// buffer the receiver will read asks `place` for its request's place
    /// before anything is built; without one nothing is sent.
    #[inline(always)]
    fn begin_send<P, E>(
        &self,
        buf: &[u8],
        dest: i32,
        tag: i32,
        context: u32,
        sync: bool,
        place: impl FnOnce() -> std::result::Result<P, E>,
    ) -> Result<Begun<P, E>> {
        if !(0..=TAG_UB).contains(&tag) {
            return Err(Error::Tag { tag });
        }
        let v = self.vci_of(context);
        if dest == PROC_NULL {
            return Ok(Begun::Complete(v, Status::empty()));
        }
        let d = self.check_rank(dest)?;
        let len = buf.len();
        let status = sent(dest, tag, len);
        let protocol = if len <= self.config.eager_max {
            Protocol::Immediate
        } else if shmheap::is_shared(buf.as_ptr()) && shmheap::is_shared(&buf[len - 1]) {
            Protocol::SingleCopy
        } else if self.config.cma && self.peer0(d).can_read_rank(self.rank) {
            Protocol::KernelAssisted
        } else {
            Protocol::TwoCopy
        };
        let sender_frees =
            sync || matches!(protocol, Protocol::SingleCopy | Protocol::KernelAssisted);
        let place = if sender_frees {
            match place() {
                Ok(p) => Some(p),
                Err(e) => return Ok(Begun::NoPlace(e)),
            }
        } else {
            None
        };
        let mut h = Header {
            source: self.rank,
            tag,
            context,
            protocol,
            len: len as u64,
            data: 0,
            reply: self.bell() as *const VciShared as u64,
            flags: if sync { FLAG_SYNC } else { 0 },
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
        unsafe { self.post(d, v, env, protocol, sync) };
        Ok(match place {
            Some(place) => Begun::Pending {
                v,
                env,
                status,
                place,
            },
            None => Begun::Complete(v, status),
        })
    }

    /// Starts receiving into the `len` bytes at `buf` a message from
    /// `source` (a rank, [`ANY_SOURCE`] or [`PROC_NULL`]) with `tag` (or
    /// [`ANY_TAG`]) in communicator context `context`. The buffer is a raw
    /// pointer, as MPI's `MPI_Irecv` takes one, so that memory no Rust
    /// reference can describe can be named: pending receives may name the
    /// same memory (the OSU bandwidth benchmarks post a whole window of
    /// receives into one buffer); it then holds whichever of their
    /// messages was copied last. For a slice `b`, pass `b.as_mut_ptr()`
    /// and `b.len()`.
    ///
    /// # Safety
    /// `buf` is non-null and valid for writes of `len` bytes until the
    /// request completes or is cancelled, and nothing but the engine reads
    /// or writes that memory meanwhile; the request must be completed or
    /// dropped, never leaked (as for [`Endpoint::isend`]). The blocking
    /// [`Endpoint::recv`] is safe.
    ///
    /// Inline, so that the request is built where the caller keeps it
    /// (see [`Endpoint::isend`]).
    #[inline]
    pub unsafe fn irecv<'a>(
        &'a self,
        buf: *mut u8,
        len: usize,
        source: i32,
        tag: i32,
        context: u32,
    ) -> Result<Request<'a>> {
        let target = Target::Buffer { buf, cap: len };
        // SAFETY: the caller keeps `buf` writable for `len` bytes and
        // untouched until the request, which collects the receive's slot
        // before it ends (waiting on drop), completes.
        unsafe { self.post_recv(target, source, tag, context) }
    }

    /// [`Endpoint::irecv`] for a layer that keeps its requests in a
    /// table of its own (the C library's request handles): a receive that
    /// matches at once returns its status and leaves no request behind;
    /// one that must wait asks `place` for a slot first (under the VCI
    /// lock, before it is posted) and writes its request there, where it
    /// stays: it is never copied (see docs/performance.md, "Store
    /// forwarding").
    ///
    /// If `place` has no slot, nothing starts: [`Start::NoPlace`].
    ///
    /// # Safety
    ///
    /// As for [`Endpoint::irecv`]; a place `place` returns is valid for
    /// a write of a request, and the request written there is completed or
    /// dropped like one [`Endpoint::irecv`] returned.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn irecv_raw_or_in<'a>(
        &'a self,
        place: impl FnOnce() -> Option<*mut Request<'a>>,
        buf: *mut u8,
        len: usize,
        source: i32,
        tag: i32,
        context: u32,
    ) -> Result<Start> {
        self.check_recv_key(source, tag)?;
        let v = self.vci_of(context);
        if source == PROC_NULL {
            return Ok(Start::Finished(Status::empty()));
        }
        let target = Target::Buffer { buf, cap: len };
        if is_every_vci(context) {
            let Some(out) = place() else {
                return Ok(Start::NoPlace);
            };
            // SAFETY: as below; `place` gave `out` for a request (the
            // caller's contract).
            unsafe { out.write(self.post_spread(target, source, tag, context)) };
            return Ok(Start::Written);
        }
        let place = || place().ok_or(());
        // SAFETY: as in `irecv`: the caller keeps `buf` valid until the
        // request completes.
        let posted = unsafe { self.vcis[v].post_recv(target, source, tag, context, place) };
        Ok(match posted {
            Posted::Matched(st) => Start::Finished(st),
            Posted::Waiting(id, out) => {
                // SAFETY: `place` gave `out` for a request (the caller's
                // contract).
                unsafe { out.write(Request::recv(self, v, id)) };
                Start::Written
            }
            Posted::NoPlace(()) => Start::NoPlace,
        })
    }

    /// Posts a receive on the context's VCI (after checking its key).
    ///
    /// # Safety
    ///
    /// The target stays valid until the returned request completes, and
    /// the request is completed or dropped, never leaked.
    #[inline(always)]
    pub(crate) unsafe fn post_recv(
        &self,
        target: Target,
        source: i32,
        tag: i32,
        context: u32,
    ) -> Result<Request<'_>> {
        self.check_recv_key(source, tag)?;
        let v = self.vci_of(context);
        if source == PROC_NULL {
            return Ok(Request::complete(self, v, Status::empty()));
        }
        if is_every_vci(context) {
            // SAFETY: the caller's contract.
            return Ok(unsafe { self.post_spread(target, source, tag, context) });
        }
        // SAFETY: the caller's contract.
        let posted = unsafe { self.vcis[v].post_recv(target, source, tag, context, || Ok(())) };
        Ok(Request::posted(self, v, posted))
    }

    /// Sends and waits (see [`Endpoint::isend`]). In
    /// [`SendMode::Synchronous`] it returns once the receiver has matched
    /// the message; a synchronous send to oneself without a receive posted
    /// first (by another thread) never returns, as in MPI.
    #[inline]
    pub fn send(
        &self,
        buf: &[u8],
        dest: i32,
        tag: i32,
        context: u32,
        mode: SendMode,
    ) -> Result<()> {
        match mode {
            SendMode::Standard => self.send_standard(buf, dest, tag, context),
            SendMode::Synchronous => self.send_sync(buf, dest, tag, context),
        }
    }

    /// [`Endpoint::send`] in [`SendMode::Standard`].
    fn send_standard(&self, buf: &[u8], dest: i32, tag: i32, context: u32) -> Result<()> {
        // A tiny message goes into the fast box without a request.
        if self
            .send_through_fastbox(buf, dest, tag, context)?
            .is_some()
        {
            return Ok(());
        }
        // The general path at once (not `isend`, which would try the fast
        // box again). The request is waited for at once, never leaked.
        self.start_send(buf, dest, tag, context, false)?
            .wait()
            .map(drop)
    }

    /// Receives and waits (see [`Endpoint::irecv`]), writing the status to
    /// `status`, a truncated or failed delivery included (in
    /// `status.error`; [`Status::into_result`] turns it into an error);
    /// `Err` only when nothing was received (invalid arguments). The
    /// receive is not posted while it waits: each attempt takes the
    /// earliest matching message that has arrived (receives posted by
    /// other threads come first; concurrent receives of several threads
    /// have no order in MPI), and a small one goes straight from the
    /// sender's fast box into `buf`.
    ///
    /// The status is an out-parameter for callers that mostly ignore it,
    /// as C programs passing `MPI_STATUS_IGNORE` do: they read the fields
    /// they need (usually only `status.error`) instead of copying the
    /// whole status (see docs/performance.md, "Store forwarding").
    #[inline]
    pub fn recv(
        &self,
        buf: &mut [u8],
        source: i32,
        tag: i32,
        context: u32,
        status: &mut Status,
    ) -> Result<()> {
        let target = Target::Buffer {
            buf: buf.as_mut_ptr(),
            cap: buf.len(),
        };
        // SAFETY: `buf` is borrowed mutably for this whole call.
        unsafe { self.recv_blocking(target, source, tag, context, status) }
    }

    /// A blocking receive into `target` (see [`Endpoint::recv`]); its
    /// status goes to `out` (an empty one for `PROC_NULL`), written in
    /// place by the attempt that receives (see [`Vci::recv_now`]).
    ///
    /// # Safety
    ///
    /// The target is valid (see [`Vci::deliver`]) for the duration of the
    /// call.
    pub(crate) unsafe fn recv_blocking(
        &self,
        target: Target,
        source: i32,
        tag: i32,
        context: u32,
        out: &mut Status,
    ) -> Result<()> {
        let Some((v, key)) = self.recv_key(source, tag, context)? else {
            *out = Status::empty();
            return Ok(());
        };
        if is_every_vci(context) {
            // SAFETY: the caller's contract.
            return unsafe { self.recv_spread(target, key, out) };
        }
        let vci = &self.vcis[v];
        let mut seen = u64::MAX;
        self.wait_on(v, Watch::source(source, context), |full| {
            if !full && !vci.news(seen) {
                return None;
            }
            let mut p = vci.lock();
            // SAFETY: the caller's contract.
            let got = unsafe { vci.recv_now(&mut p, key, target, out) };
            seen = vci.events(&p);
            got.then_some(())
        })
        .map_err(|rank| Error::ProcFailed { rank })
    }

    /// The status of the earliest message that a receive with this key
    /// would match now, without receiving it; `None` if there is none.
    pub fn iprobe(&self, source: i32, tag: i32, context: u32) -> Result<Option<Status>> {
        let Some((v, key)) = self.recv_key(source, tag, context)? else {
            return Ok(Some(Status::empty()));
        };
        if is_every_vci(context) {
            return Ok(self.iprobe_spread(key));
        }
        let vci = &self.vcis[v];
        let found = vci.iprobe(&mut vci.lock(), key);
        Ok(found)
    }

    /// Waits until a message matches, and returns its status without
    /// receiving it.
    pub fn probe(&self, source: i32, tag: i32, context: u32) -> Result<Status> {
        let Some((v, key)) = self.recv_key(source, tag, context)? else {
            return Ok(Status::empty());
        };
        if is_every_vci(context) {
            return self.probe_spread(key);
        }
        let vci = &self.vcis[v];
        self.wait_on(v, Watch::source(source, context), |_| {
            vci.iprobe(&mut vci.lock(), key)
        })
        .map_err(|rank| Error::ProcFailed { rank })
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
        let Some((v, key)) = self.recv_key(source, tag, context)? else {
            return Ok(Some(self.no_proc_message()));
        };
        if is_every_vci(context) {
            return Ok(self.improbe_spread(key));
        }
        let vci = &self.vcis[v];
        let found = vci.take_unexpected(&mut vci.lock(), key);
        Ok(found.map(|(a, st)| (Message::new(self, v, Some(a), st), st)))
    }

    /// Waits until a message matches, and takes it as [`Endpoint::improbe`]
    /// does.
    pub fn mprobe(&self, source: i32, tag: i32, context: u32) -> Result<(Message<'_>, Status)> {
        let Some((v, key)) = self.recv_key(source, tag, context)? else {
            return Ok(self.no_proc_message());
        };
        if is_every_vci(context) {
            return self.mprobe_spread(key);
        }
        let vci = &self.vcis[v];
        let (a, st): (Arrival, Status) = self
            .wait_on(v, Watch::source(source, context), |_| {
                vci.take_unexpected(&mut vci.lock(), key)
            })
            .map_err(|rank| Error::ProcFailed { rank })?;
        Ok((Message::new(self, v, Some(a), st), st))
    }

    fn no_proc_message(&self) -> (Message<'_>, Status) {
        (
            Message::new(self, 0, None, Status::empty()),
            Status::empty(),
        )
    }

    /// Waits for every request (see [`crate::wait_all`]).
    pub fn wait_all<'a>(
        &'a self,
        requests: impl IntoIterator<Item = Request<'a>>,
    ) -> Result<Vec<Status>> {
        crate::request::wait_all(requests)
    }
}

/// The status of a standard or synchronous send of `len` bytes to `dest`.
fn sent(dest: i32, tag: i32, len: usize) -> Status {
    Status {
        source: dest,
        tag,
        count: len as u64,
        error: None,
        cancelled: false,
    }
}

/// Looks up VCI `v` of rank `r` in the registry and checks it.
fn lookup_vci(seg: &Segment, r: u32, v: usize) -> Result<&'static VciShared> {
    let slot = slots::vci_slot(v).expect("v < MAX_VCIS");
    vci_at(r, v, seg.wait_lookup(r, slot))
}

/// Rank `r`'s VCI `v`, which it published at `addr`, once checked.
pub(crate) fn vci_at(r: u32, v: usize, addr: u64) -> Result<&'static VciShared> {
    if shmheap::owner_of(addr as *const u8) != Some(r)
        || addr % std::mem::align_of::<VciShared>() as u64 != 0
    {
        return Err(Error::BadPeer { rank: r, addr });
    }
    // SAFETY: rank r published (Release, read by `wait_lookup` with Acquire)
    // the address of an initialised VciShared in its own arena (checked
    // above), which is never freed.
    let peer: &'static VciShared = unsafe { &*(addr as *const VciShared) };
    if !peer.is_valid(r, v as u32) {
        return Err(Error::BadPeer { rank: r, addr });
    }
    Ok(peer)
}
